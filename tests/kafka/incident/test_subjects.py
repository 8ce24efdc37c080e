"""Incident checks on the log-replicated system: a subject is a topic-partition (`<topic>` or `<topic>-<p>`).

Through the whole pipeline (`replaudit check`) on a lab world of three clusters: `hw` (pre-KIP-101 truncation, two
topics with findings: kip101-s1 and unclean), `primary` and `dr` (a MirrorMaker 2 flow of two topics, orders-mm
and payments-mm, both with failover rows). A check scoped to one topic stores only that topic's partition dirs
(and each cluster's own files: the dirs' meta.properties and offset checkpoints, the admin and MirrorMaker 2
documents), and its findings and failover rows are exactly the scoped ground truth's."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from audit.cli.main import main
from audit.config.estate import load_estate
from audit.contracts import Scope
from audit.store import open_store
from audit.store.run import list_runs
from audit.systems.kafka.system import SYSTEM, partition_of_key
from lab.kafka.plugin import scope_truth

ESTATE = """
estate: kafka-incident
store: {{uri: "file://{store}"}}
spark: {{master: "local[2]", conf: {{spark.sql.shuffle.partitions: "2"}}}}
systems:
  kafka:
    - name: hw
      source: lab
      version: '0.10.2.1'
      lab: &world
        seed: 5
        clusters:
          - {{name: hw, policy: high-watermark, mode: zookeeper, scenarios: [kip101-scenario-1, unclean-election]}}
          - {{name: primary, policy: leader-epoch, mode: kraft, scenarios: []}}
          - {{name: dr, policy: leader-epoch, mode: kraft, scenarios: []}}
        mirrors:
          - {{source: primary, target: dr, mm2_version: '3.6.0', scenarios: [mm2-sparse-syncs, mm2-restart]}}
    - {{name: primary, source: lab, version: '3.6.2', lab: *world}}
    - {{name: dr, source: lab, version: '3.6.2', lab: *world,
       mirrors: [{{source_cluster: primary, mm2_version: '3.6.0'}}]}}
"""


def _check(tmp_path, capsys, subject: str) -> tuple[int, dict, list[str], str]:
    """(exit code, summary, the run's raw keys below raw/, report.html) of `replaudit check --subject`."""
    path = tmp_path / "estate.yaml"
    path.write_text(ESTATE.format(store=tmp_path / "store"))
    code = main(["check", "--estate", str(path), "--system", "kafka", "--subject", subject, "--json"])
    summary = json.loads(capsys.readouterr().out)
    (run,) = [r for r in list_runs(open_store(load_estate(str(path)).store.uri), "kafka-incident")
              if r.run_id == summary["run_id"]]
    raw = [o["key"].split("/raw/", 1)[1] for o in run.manifest["objects"] if "/raw/" in o["key"]]
    html = (tmp_path / "store" / run.manifest["prefix"] / "reports" / "report.html").read_text()
    return code, summary, raw, html


def _partition_dirs(raw: list[str], cluster: str) -> set[str]:
    prefix = f"kafka/{cluster}/"
    return {k[len(prefix):].split("/")[3] for k in raw
            if k.startswith(prefix) and partition_of_key(k[len(prefix):]) is not None}


def _truths(tmp_path, raw: list[str], summary: dict) -> dict:
    (run,) = [r for r in list_runs(open_store(f"file://{tmp_path / 'store'}"), "kafka-incident")
              if r.run_id == summary["run_id"]]
    return {k.split("/")[1]: json.loads((tmp_path / "store" / run.manifest["prefix"] / "raw" / k).read_text())
            for k in raw if k.startswith("_lab/") and k.endswith("ground_truth.json")}


def test_one_topic_of_one_cluster(tmp_path, capsys):
    code, summary, raw, html = _check(tmp_path, capsys, "kip101-s1*")
    assert summary["run_id"].startswith("incident__") and summary["run"]["kind"] == "incident"
    assert summary["run"]["scope"]["subjects"] == ["kip101-s1*"]
    assert '<h2 id="incident">Incident check</h2>' in html and "kip101-s1*" in html     # the report says so
    # only that topic's partition dirs are stored; each cluster's own evidence stays
    assert _partition_dirs(raw, "hw") == {"kip101-s1-0"}
    assert _partition_dirs(raw, "primary") == _partition_dirs(raw, "dr") == set()
    for cluster in ("hw", "primary", "dr"):
        assert f"kafka/{cluster}/admin/metadata.json" in raw
    assert "kafka/hw/brokers/1/dir0/replication-offset-checkpoint" in raw            # lists every partition
    assert {k for k in raw if k.startswith("kafka/dr/mm2/")}                         # MirrorMaker 2 read whole
    # the findings are that topic's only, and the scoped ground truth's exactly
    truths = _truths(tmp_path, raw, summary)
    expected = [f for t in truths.values() for f in t["findings"]]
    assert expected and {f["topic"] for f in expected} == {"kip101-s1"}
    assert not [f for t in truths.values() for f in t["mm2_failover"]]
    lab = summary["lab"]
    assert (lab["missed"], lab["false_alarms"], lab["wrong_count"]) == (0, 0, 0), lab
    assert lab["injected"] == lab["detected"] == len(expected)
    assert set(summary["counts"]["by_check"]) == {f["check"] for f in expected}
    assert lab["mm2_failover"]["expected"] == lab["mm2_failover"]["matched"] == 0
    # nothing of the topics not asked for is a gap either
    assert not [g for g in summary.get("coverage_gaps") or [] if "unclean" in json.dumps(g)]
    assert code in (0, 1, 3)


def test_one_mirrored_topic_judges_only_its_flow_partitions(tmp_path, capsys):
    code, summary, raw, _ = _check(tmp_path, capsys, "payments-mm")
    assert _partition_dirs(raw, "primary") == {"payments-mm-0", "payments-mm-1"}
    assert _partition_dirs(raw, "hw") == _partition_dirs(raw, "dr") == set()    # `primary.payments-mm`: not asked
    truths = _truths(tmp_path, raw, summary)
    failover = [f for t in truths.values() for f in t["mm2_failover"]]
    assert failover and {f["topic"] for f in failover} == {"payments-mm"}
    lab = summary["lab"]
    assert (lab["missed"], lab["false_alarms"], lab["wrong_count"]) == (0, 0, 0), lab
    assert lab["mm2_failover"]["perfect"], lab["mm2_failover"]
    assert lab["mm2_failover"]["expected"] == lab["mm2_failover"]["matched"] == len(failover)
    assert code in (0, 1, 3)


@pytest.mark.parametrize("key, names", [
    ("brokers/1/dir0/orders-3/batches.json", ("orders", "orders-3")),
    ("brokers/2/dir1/my.topic-with-dash-12/leader-epoch-checkpoint", ("my.topic-with-dash", "my.topic-with-dash-12")),
    ("brokers/1/dir0/primary.payments-mm-0/partition.metadata", ("primary.payments-mm", "primary.payments-mm-0")),
    ("brokers/1/dir0/__cluster_metadata-0/00000000000000000000.log", None),   # the cluster's metadata log
    ("brokers/1/dir0/replication-offset-checkpoint", None),                    # the dir's own files
    ("brokers/1/dir0/scan.json", None),
    ("brokers/1/dir0/orders-0.9f1c2d3e4a5b46c7a8b9c0d1e2f3a4b5-delete/x", None),
    ("brokers/1/dump-log/orders-0/00000000000000000000.log", None),          # an import: not a log dir
    ("admin/metadata.json", None),
    ("mm2/primary/groups.json", None),
    ("collection.json", None),
])
def test_partition_of_key(key, names):
    assert partition_of_key(key) == names


def test_a_pattern_matches_the_topic_or_the_partition():
    from audit.systems.kafka.domain.subjects import flow_wanted, wanted

    assert wanted(Scope(subjects=("orders*",)), "orders", 3)
    assert wanted(Scope(subjects=("orders-3",)), "orders", 3)
    assert not wanted(Scope(subjects=("orders-3",)), "orders", 1)
    assert wanted(Scope(), "anything", 0) and wanted(None, "anything", 0)
    assert flow_wanted(Scope(subjects=("primary.pay*",)), "payments-mm", 0, "primary")
    assert flow_wanted(Scope(subjects=("payments-mm",)), "payments-mm", 0, "primary", "_")
    assert not flow_wanted(Scope(subjects=("primary.pay*",)), "payments-mm", 0, "primary", "_")
    assert SYSTEM.incident is not None and "topic-partition" in SYSTEM.incident.subject


def test_the_ground_truth_is_scoped_like_the_audit():
    truth = {"findings": [{"check": "a", "topic": "orders", "partition": 0},
                          {"check": "a", "topic": "clicks", "partition": 0},
                          {"check": "m", "topic": "pay", "partition": 1, "source": "east", "group": "g"}],
             "mm2_failover": [{"topic": "pay", "partition": 1, "source": "east"},
                              {"topic": "orders", "partition": 1, "source": "east"}],
             "truncations": [{"topic": "clicks", "partition": 0}], "acknowledged_lost": {"clicks": 3, "orders": 1},
             "seed": 5}
    cluster = SimpleNamespace(mirrors=[SimpleNamespace(source_cluster="east", source_alias=None, separator="_")])
    out = scope_truth(truth, Scope(subjects=("orders-0", "east_pay*")), cluster)
    assert [f["check"] for f in out["findings"]] == ["a", "m"] and out["findings"][0]["topic"] == "orders"
    assert out["mm2_failover"] == [{"topic": "pay", "partition": 1, "source": "east"}]
    assert out["truncations"] == [] and out["acknowledged_lost"] == {} and out["seed"] == 5


REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real" / "kafka-broker-logdir-01"


@pytest.mark.parametrize("scanned_whole", [False, True])
def test_the_audit_judges_only_the_wanted_partitions(spark, tmp_path, scanned_whole):
    """A real broker log dir of 51 partitions (`one-0` and 50 of `__consumer_offsets`), whose offset checkpoints
    list all of them: scoped to `one`, only `one-0` is judged, whether the scanner skipped the others (their
    checkpoint entries still there) or evidence of the whole dir was collected."""
    import pyarrow.parquet as pq

    from audit.systems.kafka.collect.logdir import scan_log_dir
    from audit.contracts import AuditRequest
    from audit.systems.kafka.transforms import normalize
    from audit.systems.kafka.transforms.audit import run

    scope = Scope(systems=("kafka",), subjects=("one",))
    raw = tmp_path / "raw" / "kafka" / "real"

    def put(key: str, data: bytes) -> None:
        path = raw / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    result = scan_log_dir(str(REAL), 0, put, check_broker=False, scope=None if scanned_whole else scope)
    assert result.gaps == []
    if not scanned_whole:
        assert result.counts["partition_dirs_not_in_scope"] == 50 and result.scan["partitions"] == ["one-0"]
        assert b"__consumer_offsets" in (raw / "brokers/0/dir0/replication-offset-checkpoint").read_bytes()
    normalize.run(spark, str(tmp_path / "raw"), str(tmp_path / "tables"))
    thresholds = SimpleNamespace(kafka_follower_lag_max=10_000, kafka_mm2_redelivery_tolerance=0)
    counts = run(spark, str(tmp_path / "tables"), str(tmp_path / "out"),
                 AuditRequest("real", None, thresholds, (SimpleNamespace(name="real", version="3.6.2", mirrors=(),
                                                                         brokers=()),), scope))
    assert counts["kafka_violations"] == 0
    assert counts["kafka_partitions"] == counts["kafka_replicas"] == 1
    assert [r["topic"] for r in pq.read_table(tmp_path / "out" / "metrics" / "kafka_partitions").to_pylist()] == \
        ["one"]
    (row,) = pq.read_table(tmp_path / "out" / "metrics" / "kafka_coverage").to_pylist()   # the one-broker note
    assert json.loads(row["detail"])["partitions"] == 1 and row["what"].startswith("1 partition(s)")


def test_the_admin_collector_and_the_scanner_ask_about_the_wanted_partitions_only():
    """The lab's cluster through the real admin collector (loopback) and scanner with a scope: Metadata whole,
    DescribeLogDirs, ListOffsets and OffsetForLeaderEpoch of `orders-mm-1` only; its partition dirs only."""
    from lab.kafka import runner
    from tests.lab.kafka.helpers import AS_OF, DictSink

    lab = {"seed": 5, "clusters": [{"name": "primary", "policy": "leader-epoch", "mode": "kraft", "scenarios": []},
                                   {"name": "dr", "policy": "leader-epoch", "mode": "kraft", "scenarios": []}],
           "mirrors": [{"source": "primary", "target": "dr", "mm2_version": "3.6.0",
                        "scenarios": ["mm2-sparse-syncs", "mm2-restart"]}]}
    sink = DictSink()
    report, _ = runner.collect(SimpleNamespace(name="primary", lab=lab, mirrors=()), sink, None, AS_OF,
                               scope=Scope(subjects=("orders-mm-1",)))
    doc = {name: json.loads(sink[f"admin/{name}.json"])
           for name in ("metadata", "log-dirs", "list-offsets", "offsets-for-leader-epoch")}
    assert {(p["topic"], p["partition"]) for p in doc["metadata"]["partitions"]} >= {("orders-mm", 0),
                                                                                    ("payments-mm", 1)}
    assert {(p["topic"], p["partition"]) for p in doc["list-offsets"]["partitions"]} == {("orders-mm", 1)}
    assert {(a["topic"], a["partition"]) for a in doc["offsets-for-leader-epoch"]["answers"]} == {("orders-mm", 1)}
    described = {(p["topic"], p["partition"]) for b in doc["log-dirs"]["brokers"] for d in b["log_dirs"]
                 for p in d["partitions"]}
    assert described == {("orders-mm", 1)}
    assert {k.split("/")[3] for k in sink if partition_of_key(k)} == {"orders-mm-1"}
    assert report.gaps == []
    assert report.counts["partitions_not_in_scope"] == len(doc["metadata"]["partitions"]) - 1
    assert report.counts["partition_dirs_not_in_scope"] > 0
