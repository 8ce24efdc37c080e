"""Estate files: the shipped lab estate, a full estate, and clear errors for every kind of bad input."""
import textwrap
from pathlib import Path

import pytest

from audit.config import EstateError, load_estate
from audit.config.durations import parse_duration
from audit.config.model import SecretRef

REPO = Path(__file__).resolve().parents[2]

FULL = """\
estate: prod-eu
store:
  uri: s3://audit-evidence/replaudit/
  endpoint_url: http://127.0.0.1:9000
  region: eu-west-1
  credentials:
    access_key: {env: AWS_ACCESS_KEY_ID}
    secret_key: {env: AWS_SECRET_ACCESS_KEY}
spark:
  master: spark://127.0.0.1:7077
  conf:
    spark.sql.shuffle.partitions: 8
    spark.sql.adaptive.enabled: true
thresholds:
  open_ledger_max_age: 1h30m
  min_racks_per_write_quorum: 3
alerts:
  routes:
    - name: ops
      kind: webhook
      url: https://hooks.example.com/replaudit
      headers_from:
        Authorization: {env: OPS_TOKEN}
        X-Api-Key: {airflow_conn: ops_hook, field: extra.api_key}
      min_severity: major
      timeout_s: 5
systems:
  bookkeeper:
    - name: bk-east
      source: zookeeper
      zookeeper:
        hosts: zk1:2181,zk2:2181/pulsar
        ledgers_root: /ledgers
        digest_auth: {env: ZK_AUTH}
      bookie_addresses: {bookie-1: "10.0.0.1:3181"}
      racks: {"10.0.0.1:3181": /eu/rack1}
      timeouts: {connect_s: 2, request_s: 10.5}
    - name: bk-lab
      source: lab
      lab:
        seed: 11
        ledgers: 40
        bookies: 6
        entries_per_ledger: 100
        faults:
          - {kind: bookie_crash, bookie: bookie-02.lab:3181, ago_min: 30}
          - {kind: ensemble_change, ledgers: 3}
"""


def write(tmp_path, text, name="estate.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error_for(tmp_path, text) -> EstateError:
    path = write(tmp_path, text)
    with pytest.raises(EstateError) as info:
        load_estate(path, home=tmp_path)
    assert info.value.path == str(path)
    assert str(info.value).startswith(f"{path}: {info.value.field}: ")
    return info.value


MINIMAL = "estate: e\nsystems: {bookkeeper: [{name: bk, source: lab}]}\n"


def test_shipped_lab_estate(monkeypatch, tmp_path):
    monkeypatch.setenv("REPLAUDIT_HOME", str(tmp_path))
    estate = load_estate(REPO / "lab" / "estate.yaml")
    assert estate.name == "lab"
    assert estate.home == tmp_path.resolve()
    assert estate.store.uri == f"file://{tmp_path.resolve()}/.work/store"
    assert estate.alerts.routes == ()
    [cluster] = estate.clusters("bookkeeper")
    assert (cluster.name, cluster.source, cluster.lab["seed"]) == ("bk-lab", "lab", 7)
    assert estate.cluster("bookkeeper", "bk-lab") is cluster


def test_full_estate(tmp_path):
    estate = load_estate(write(tmp_path, FULL), home=tmp_path)
    assert estate.store.uri == "s3://audit-evidence/replaudit"
    assert estate.store.scheme == "s3"
    assert estate.store.credentials.access_key == SecretRef(env="AWS_ACCESS_KEY_ID",
                                                            where="store.credentials.access_key")
    assert estate.spark.conf == {"spark.sql.shuffle.partitions": "8", "spark.sql.adaptive.enabled": "true"}
    assert estate.thresholds.open_ledger_max_age_s == 5400
    assert estate.thresholds.min_racks_per_write_quorum == 3
    [route] = estate.alerts.routes
    assert route.headers_from["X-Api-Key"] == SecretRef(
        airflow_conn="ops_hook", field="extra.api_key", where="alerts.routes[0].headers_from.X-Api-Key")
    assert route.accepts("critical") and route.accepts("major") and not route.accepts("minor")
    east, lab = estate.clusters("bookkeeper")
    assert east.zookeeper.hosts == "zk1:2181,zk2:2181/pulsar"
    assert east.zookeeper.digest_auth.env == "ZK_AUTH"
    assert east.racks == {"10.0.0.1:3181": "/eu/rack1"}
    assert (east.timeouts.connect_s, east.timeouts.request_s) == (2.0, 10.5)
    assert east.lab is None
    assert lab.lab["faults"] == [{"kind": "bookie_crash", "bookie": "bookie-02.lab:3181", "ago_min": 30},
                                 {"kind": "ensemble_change", "ledgers": 3}]
    assert lab.zookeeper is None and lab.timeouts.connect_s == 5.0
    with pytest.raises(KeyError, match="bk-west"):
        estate.cluster("bookkeeper", "bk-west")


def test_defaults_of_a_minimal_estate(tmp_path):
    estate = load_estate(write(tmp_path, MINIMAL), home=tmp_path)
    assert estate.store.uri == f"file://{tmp_path.resolve()}/.work/store"
    assert estate.spark.master == "local[*]" and estate.spark.conf == {}
    assert estate.thresholds.open_ledger_max_age_s == 6 * 3600
    assert estate.clusters("bookkeeper")[0].lab == {}


def test_relative_store_path_resolves_against_home_not_the_estate_folder(tmp_path):
    sub = tmp_path / "conf"
    sub.mkdir()
    path = write(sub, "estate: e\nstore: {uri: 'file://data/store'}\nsystems: {}\n")
    assert load_estate(path, home=tmp_path).store.uri == f"file://{tmp_path.resolve()}/data/store"
    absolute = write(sub, "estate: e\nstore: {uri: 'file:///srv/evidence'}\nsystems: {}\n", "abs.yaml")
    assert load_estate(absolute, home=tmp_path).store.uri == "file:///srv/evidence"


def test_lab_block_is_a_copy(tmp_path):
    path = write(tmp_path, MINIMAL.replace("source: lab}", "source: lab, lab: {faults: [{kind: disk_loss}]}}"))
    first = load_estate(path, home=tmp_path)
    first.clusters("bookkeeper")[0].lab["faults"].append({"kind": "mutated"})
    assert load_estate(path, home=tmp_path).clusters("bookkeeper")[0].lab == {"faults": [{"kind": "disk_loss"}]}


def test_typo_names_file_field_and_suggestion(tmp_path):
    err = error_for(tmp_path, "estate: e\nstore: {ur1: 'file://x'}\nsystems: {}\n")
    assert err.field == "store.ur1"
    assert "did you mean 'uri'?" in err.message and "got unknown key 'ur1'" in err.message


def test_typo_deep_in_a_cluster(tmp_path):
    err = error_for(tmp_path, """\
        estate: e
        systems:
          bookkeeper:
            - name: bk
              source: zookeeper
              zookeeper: {hosts: "zk:2181", ledger_root: /ledgers}
        """)
    assert err.field == "systems.bookkeeper[0].zookeeper.ledger_root"
    assert "did you mean 'ledgers_root'?" in err.message


def test_unknown_system_is_suggested(tmp_path):
    err = error_for(tmp_path, "estate: e\nsystems: {bookeeper: []}\n")
    assert err.field == "systems.bookeeper" and "did you mean 'bookkeeper'?" in err.message


def test_literal_secret_is_refused_without_echoing_it(tmp_path):
    err = error_for(tmp_path, """\
        estate: e
        store:
          uri: s3://bucket
          credentials: {access_key: {env: AK}, secret_key: "wJalrXUtnFEMI/K7MDENG"}
        systems: {}
        """)
    assert err.field == "store.credentials.secret_key"
    assert "put the secret in an env var or Airflow connection" in err.message
    assert "wJalrXUtnFEMI" not in str(err)


def test_literal_header_secret_and_password_in_url(tmp_path):
    err = error_for(tmp_path, """\
        estate: e
        alerts: {routes: [{name: ops, url: "http://h/x", headers_from: {Authorization: "Bearer abc123"}}]}
        systems: {}
        """)
    assert err.field == "alerts.routes[0].headers_from.Authorization"
    assert "abc123" not in str(err)
    err = error_for(tmp_path, "estate: e\nalerts: {routes: [{name: ops, url: 'http://u:hunter22@h/x'}]}\nsystems: {}\n")
    assert err.field == "alerts.routes[0].url" and "hunter22" not in str(err)


@pytest.mark.parametrize("value", ["6 hours", "-5", "1.5h", "true", "[]"])
def test_bad_duration(tmp_path, value):
    err = error_for(tmp_path, f"estate: e\nthresholds: {{open_ledger_max_age: {value}}}\nsystems: {{}}\n")
    assert err.field == "thresholds.open_ledger_max_age"
    assert "a duration like 30s" in err.message or "non-negative" in err.message


def test_duplicate_cluster_names(tmp_path):
    err = error_for(tmp_path, """\
        estate: e
        systems:
          bookkeeper:
            - {name: bk, source: lab}
            - {name: bk, source: lab}
        """)
    assert err.field == "systems.bookkeeper[1].name"
    assert "unique" in err.message and "got duplicate 'bk'" in err.message


@pytest.mark.parametrize("text, field, expected", [
    ("systems: {}\n", "estate", "required"),
    ("estate: Bad_Name\nsystems: {}\n", "estate", "lowercase letters"),
    ("estate: e\nstore: {uri: 'ftp://x'}\nsystems: {}\n", "store.uri", "file://<path> or s3://"),
    ("estate: e\nstore: {uri: 's3://UPPER'}\nsystems: {}\n", "store.uri", "bucket name"),
    ("estate: e\nstore: {uri: 'file://x', region: eu-west-1}\nsystems: {}\n", "store", "only with an s3://"),
    ("estate: e\nstore: {uri: 's3://bkt', endpoint_url: 'localhost:9000'}\nsystems: {}\n", "store.endpoint_url",
     "http://"),
    ("estate: e\nstore: {uri: 's3://bkt', credentials: {access_key: {env: A}}}\nsystems: {}\n",
     "store.credentials.secret_key", "required"),
    ("estate: e\nstore: {uri: 's3://bkt', credentials: {access_key: {env: A, airflow_conn: c}, secret_key: {env: B}}}\n"
     "systems: {}\n", "store.credentials.access_key", "exactly one of env / airflow_conn"),
    ("estate: e\nspark: {conf: {sql.shuffle.partitions: 4}}\nsystems: {}\n", "spark.conf.sql.shuffle.partitions",
     "starting with 'spark.'"),
    ("estate: e\nthresholds: {min_racks_per_write_quorum: two}\nsystems: {}\n",
     "thresholds.min_racks_per_write_quorum", "an integer"),
    ("estate: e\nalerts: {routes: [{name: ops, url: 'http://h', min_severity: high}]}\nsystems: {}\n",
     "alerts.routes[0].min_severity", "critical | major | minor | warning"),
    ("estate: e\nsystems: {bookkeeper: [{name: bk, source: kafka}]}\n", "systems.bookkeeper[0].source",
     "lab | zookeeper"),
    ("estate: e\nsystems: {bookkeeper: [{name: bk, source: zookeeper}]}\n", "systems.bookkeeper[0].zookeeper",
     "required for source: zookeeper"),
    ("estate: e\nsystems: {bookkeeper: [{name: bk, source: zookeeper, zookeeper: {hosts: zk:2181}, lab: {}}]}\n",
     "systems.bookkeeper[0].lab", "only with source: lab"),
    ("estate: e\nsystems: {bookkeeper: [{name: bk, source: zookeeper, zookeeper: {hosts: zk}}]}\n",
     "systems.bookkeeper[0].zookeeper.hosts", "host:port"),
    ("estate: e\nsystems: {bookkeeper: [{name: bk, source: zookeeper, zookeeper: {hosts: 'zk:99999'}}]}\n",
     "systems.bookkeeper[0].zookeeper.hosts", "65535"),
    ("estate: e\nsystems: {bookkeeper: [{name: bk, source: lab, lab: {ledgers: sixty}}]}\n",
     "systems.bookkeeper[0].lab.ledgers", "an integer"),
    ("estate: e\nsystems: {bookkeeper: [{name: bk, source: lab, lab: {seed: true}}]}\n",
     "systems.bookkeeper[0].lab.seed", "an integer"),
    ("estate: e\nsystems: {bookkeeper: [{name: bk, source: lab, lab: {faults: [{bookie: 1}]}}]}\n",
     "systems.bookkeeper[0].lab.faults[0].kind", "one of ['bookie_crash'"),
    ("estate: e\nsystems: {bookkeeper: [{name: bk, source: lab, racks: {b1: rack1}}]}\n",
     "systems.bookkeeper[0].racks.b1", "/region/rack"),
    ("estate: e\nsystems: {bookkeeper: [{name: bk, source: lab, timeouts: {connect_s: 0}}]}\n",
     "systems.bookkeeper[0].timeouts.connect_s", "positive"),
    ("estate: e\nsystems: {bookkeeper: {name: bk}}\n", "systems.bookkeeper", "a list of clusters"),
    ("- just\n- a list\n", "(top level)", "a mapping"),
])
def test_bad_values_name_the_field(tmp_path, text, field, expected):
    err = error_for(tmp_path, text)
    assert err.field == field
    assert expected in err.message
    assert ", got " in err.message


def test_duplicate_yaml_key_and_broken_yaml(tmp_path):
    err = error_for(tmp_path, "estate: a\nestate: b\nsystems: {}\n")
    assert "duplicate key 'estate'" in err.message and "line 2" in err.message
    err = error_for(tmp_path, "estate: e\nsystems: {bookkeeper: [\n")
    assert err.message.startswith("valid YAML, got")


def test_missing_file(tmp_path):
    with pytest.raises(EstateError) as info:
        load_estate(tmp_path / "absent.yaml")
    assert "absent.yaml" in str(info.value) and "readable estate file" in str(info.value)


@pytest.mark.parametrize("value, seconds", [
    (0, 0), (45, 45), ("30s", 30), ("15m", 900), ("6h", 21600), ("2d", 172800), ("1h30m", 5400), ("90", 90),
    (" 6H ", 21600),
])
def test_parse_duration(value, seconds):
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", [True, -1, "6 hours", "h", "1.5h", None, 2.5])
def test_parse_duration_rejects(value):
    with pytest.raises(ValueError):
        parse_duration(value)


@pytest.mark.parametrize("system, block, field, expected", [
    ("bookkeeper", "{seeed: 3}", "systems.bookkeeper[0].lab.seeed", "one of ["),
    ("bookkeeper", "{faults: [{kind: disk_loss, ago_min: 0}]}", "systems.bookkeeper[0].lab.faults[0].ago_min",
     "an integer >= 1"),
    ("pulsar", "{seeed: 3}", "systems.pulsar[0].lab.seeed", "one of seed,"),
    ("pulsar", "{traffic: loud}", "systems.pulsar[0].lab.traffic", "'continuous' or 'quiet'"),
    ("kafka", "{seeed: 3}", "systems.kafka[0].lab.seeed", "one of seed,"),
    ("kafka", "{clusters: [{name: a, policy: sometimes}]}", "systems.kafka[0].lab.clusters[0].policy",
     "'high-watermark' or 'leader-epoch'"),
])
def test_lab_blocks_are_read_by_the_lab_when_the_estate_is(tmp_path, system, block, field, expected):
    # `replaudit estate check` refuses what the simulator would, at the key's own path
    err = error_for(tmp_path, f"estate: e\nsystems:\n  {system}:\n    - {{name: c1, source: lab, lab: {block}}}\n")
    assert err.field == field and expected in err.message
