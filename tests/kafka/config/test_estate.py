"""The systems.kafka section: admin, log-dirs and lab clusters, MirrorMaker 2 flows between them, the thresholds,
and a clear error naming the field for each bad value."""
import pytest

from audit.config import EstateError
from audit.config.estate import estate_schema, parse_estate
from audit.systems.kafka.config import RULE_NEW, RULE_OLD, KafkaCluster
from audit.config.model import SecretRef

HEAD = "estate: mirrors\nstore: {uri: file:///tmp/replaudit-x}\n"

FULL = HEAD + """\
thresholds:
  kafka_follower_lag_max: 500
  kafka_mm2_redelivery_tolerance: 3
systems:
  kafka:
    - name: east
      source: admin
      bootstrap_servers: "h1:9092, h2:9093"
      sasl: {mechanism: SCRAM-SHA-512, username: {env: KAFKA_USER}, password: {airflow_conn: kafka_east}}
      security_protocol: SASL_SSL
      log_dirs:
        - {broker: 1, path: /mnt/b1/kafka-logs}
        - {broker: 1, path: /mnt/b1/kafka-logs-2}
        - {broker: 2, path: /mnt/b2/kafka-logs}
      version: "3.6.2"
      verify_crc: true
      mirrors:
        - {source_cluster: west, mm2_version: "3.4.0", offset_syncs_location: target, groups: ["orders-*"]}
      timeouts: {request_s: 10}
    - name: west
      source: admin
      bootstrap_servers: "w1:9092"
    - name: offline
      source: log-dirs
      brokers: [0, 1, 2]
    - name: lab-a
      source: lab
      lab: {seed: 7}
    - name: lab-b
      source: lab
      lab: {seed: 7}
      mirrors: [{source_cluster: lab-a, source_alias: A, target_alias: B, separator: "_"}]
"""


def test_full_kafka_section():
    estate = parse_estate(FULL)
    east, west, offline, lab_a, lab_b = estate.clusters("kafka")
    assert (east.source, east.bootstrap_servers, east.security_protocol) == ("admin", "h1:9092,h2:9093", "SASL_SSL")
    assert east.sasl.mechanism == "SCRAM-SHA-512"
    assert east.sasl.username == SecretRef(env="KAFKA_USER", where="systems.kafka[0].sasl.username")
    assert east.sasl.password.airflow_conn == "kafka_east"
    assert east.dirs_of == {1: ("/mnt/b1/kafka-logs", "/mnt/b1/kafka-logs-2"), 2: ("/mnt/b2/kafka-logs",)}
    assert (east.version, east.verify_crc, east.timeouts.request_s, east.lab) == ("3.6.2", True, 10, None)
    (m,) = east.mirrors
    assert (m.source_cluster, m.source_alias, m.target_alias) == ("west", "west", "east")
    assert (m.offset_syncs_location, m.translation_rule, m.groups) == ("target", RULE_OLD, ("orders-*",))
    # on the target, the syncs topic is named after the source alias (MirrorCheckpointConfig.offsetSyncsTopic)
    assert (m.offset_syncs_topic, m.checkpoints_topic) == ("mm2-offset-syncs.west.internal",
                                                           "west.checkpoints.internal")
    assert m.remote_topic("orders") == "west.orders" and m.selects("orders-eu") and not m.selects("billing")
    assert west.security_protocol == "PLAINTEXT" and west.mirrors == () and west.verify_crc is False
    assert offline.bootstrap_servers is None and offline.log_dirs == () and offline.brokers == (0, 1, 2)
    assert east.brokers == ()   # not declared: the admin metadata names them
    assert lab_a.lab == {"seed": 7}
    (lm,) = lab_b.mirrors
    assert (lm.source_alias, lm.target_alias, lm.translation_rule) == ("A", "B", RULE_NEW)
    assert (lm.offset_syncs_topic, lm.checkpoints_topic, lm.remote_topic("t")) == (
        "mm2-offset-syncs_B_internal", "A_checkpoints_internal", "A_t")
    assert estate.thresholds.kafka_follower_lag_max == 500
    assert estate.thresholds.kafka_mm2_redelivery_tolerance == 3


def test_defaults():
    estate = parse_estate(HEAD + "systems:\n  kafka:\n    - {name: e, source: admin, bootstrap_servers: 'h:9092'}\n")
    (e,) = estate.clusters("kafka")
    assert (e.security_protocol, e.sasl, e.version, e.verify_crc, e.mirrors, e.log_dirs) == (
        "PLAINTEXT", None, None, False, (), ())
    assert (e.timeouts.connect_s, e.timeouts.request_s) == (5.0, 30.0)
    assert estate.thresholds.kafka_follower_lag_max == 10_000
    assert estate.thresholds.kafka_mm2_redelivery_tolerance == 0


def test_sasl_implies_its_protocol():
    c = KafkaCluster(name="e", source="admin", bootstrap_servers="h:9092",
                     sasl={"mechanism": "PLAIN", "username": {"env": "U"}, "password": {"env": "P"}})
    assert c.security_protocol == "SASL_PLAINTEXT"


@pytest.mark.parametrize("version, rule", [("3.4.0", RULE_OLD), ("2.8", RULE_OLD), ("3.4.1", RULE_NEW),
                                           ("3.5.0", RULE_NEW), ("3.10.0", RULE_NEW), ("4.0.0", RULE_NEW)])
def test_mm2_version_picks_the_translation_rule(version, rule):
    c = KafkaCluster(name="e", source="lab", lab={}, mirrors=[{"source_cluster": "w", "mm2_version": version}])
    assert c.mirrors[0].translation_rule == rule


def _error(text: str) -> EstateError:
    with pytest.raises(EstateError) as info:
        parse_estate(HEAD + "systems:\n  kafka:\n" + text)
    return info.value


ADMIN = "    - {name: e, source: admin, bootstrap_servers: 'h:9092'"


@pytest.mark.parametrize("text, field, expected", [
    ("    - {name: e, source: admin}\n", "systems.kafka[0].bootstrap_servers", "required for source: admin"),
    ("    - {name: e, source: log-dirs, bootstrap_servers: 'h:9092'}\n", "systems.kafka[0].bootstrap_servers",
     "no bootstrap_servers with source: log-dirs"),
    ("    - {name: e, source: lab, lab: {}, bootstrap_servers: 'h:9092'}\n", "systems.kafka[0].bootstrap_servers",
     "no bootstrap_servers with source: lab"),
    ("    - {name: e, source: lab}\n", "systems.kafka[0].lab", "a lab block (required for source: lab)"),
    ("    - {name: e, source: log-dirs, lab: {}}\n", "systems.kafka[0].lab", "only with source: lab"),
    ("    - {name: e, source: lab, lab: {}, log_dirs: [{broker: 1, path: /x}]}\n", "systems.kafka[0].log_dirs",
     "no log_dirs with source: lab"),
    ("    - {name: e, source: zookeeper}\n", "systems.kafka[0].source", "one of lab | admin | log-dirs"),
    (ADMIN.replace("'h:9092'", "'h'") + "}\n", "systems.kafka[0].bootstrap_servers", "host:port"),
    (ADMIN.replace("'h:9092'", "'h:99999'") + "}\n", "systems.kafka[0].bootstrap_servers", "ports between"),
    (ADMIN.replace("'h:9092'", "'u:secret@h:9092'") + "}\n", "systems.kafka[0].bootstrap_servers",
     "without credentials"),
    (ADMIN + ", sasl: {mechanism: PLAIN, username: me, password: {env: P}}}\n",
     "systems.kafka[0].sasl.username", "{env: NAME} or {airflow_conn: ID"),
    (ADMIN + ", sasl: {mechanism: GSSAPI, username: {env: U}, password: {env: P}}}\n",
     "systems.kafka[0].sasl.mechanism", "one of PLAIN"),
    (ADMIN + ", security_protocol: SSL, sasl: {mechanism: PLAIN, username: {env: U}, password: {env: P}}}\n",
     "systems.kafka[0].security_protocol", "SASL_PLAINTEXT or SASL_SSL"),
    (ADMIN + ", version: 'latest'}\n", "systems.kafka[0].version", "dotted numbers"),
    (ADMIN + ", version: '3'}\n", "systems.kafka[0].version", "dotted numbers"),
    (ADMIN + ", log_dirs: [{broker: -1, path: /x}]}\n", "systems.kafka[0].log_dirs[0].broker", ">= 0"),
    (ADMIN + ", log_dirs: [{broker: 1, path: relative}]}\n", "systems.kafka[0].log_dirs[0].path", "absolute"),
    (ADMIN + ", log_dirs: [{broker: 1, path: /x}, {broker: 1, path: /x}]}\n", "systems.kafka[0].log_dirs[1]",
     "each broker's log dir once"),
    (ADMIN + ", verify_crc: 'yes'}\n", "systems.kafka[0].verify_crc", "true or false"),
    (ADMIN + ", mirrors: [{source_cluster: e}]}\n", "systems.kafka[0].mirrors[0].source_cluster",
     "another cluster than this one"),
    (ADMIN + ", mirrors: [{source_cluster: nowhere}]}\n", "systems.kafka[0].mirrors[0].source_cluster",
     "the name of another systems.kafka cluster"),
    (ADMIN + ", mirrors: [{source_cluster: w, mm2_version: '3.x'}]}\n",
     "systems.kafka[0].mirrors[0].mm2_version", "dotted numbers"),
    (ADMIN + ", mirrors: [{source_cluster: w, offset_syncs_location: both}]}\n",
     "systems.kafka[0].mirrors[0].offset_syncs_location", "one of source | target"),
    (ADMIN + ", mirrors: [{source_cluster: w}, {source_cluster: v, source_alias: w}]}\n",
     "systems.kafka[0].mirrors[1].source_alias", "one mirror per source alias"),
    (ADMIN + ", mirrors: [{source_cluster: w, separator: ' '}]}\n", "systems.kafka[0].mirrors[0].separator",
     "replication.policy.separator"),
    (ADMIN + ", mirors: []}\n", "systems.kafka[0].mirors", "(did you mean 'mirrors'?)"),
    (ADMIN + ", brokers: [1, 1]}\n", "systems.kafka[0].brokers", "no duplicates"),
    (ADMIN + ", brokers: [-2]}\n", "systems.kafka[0].brokers[0]", ">= 0"),
    (ADMIN + ", brokers: 3}\n", "systems.kafka[0].brokers", "a list of broker ids"),
    (ADMIN + ", brokers: [1], log_dirs: [{broker: 2, path: /x}]}\n", "systems.kafka[0].log_dirs[0].broker",
     "a broker of brokers (1)"),
])
def test_bad_kafka_fields_name_the_field(text, field, expected):
    err = _error(text)
    assert err.field == field, str(err)
    assert expected in str(err)


def test_a_password_in_the_bootstrap_list_is_never_echoed():
    err = _error(ADMIN.replace("'h:9092'", "'admin:hunter2@h:9092'") + "}\n")
    assert "hunter2" not in str(err)


@pytest.mark.parametrize("clusters, expected", [
    ("    - {name: t, source: lab, lab: {}, mirrors: [{source_cluster: s}]}\n"
     "    - {name: s, source: admin, bootstrap_servers: 'h:9092'}\n", "lab with lab"),
    ("    - {name: t, source: admin, bootstrap_servers: 'h:9092', mirrors: [{source_cluster: s}]}\n"
     "    - {name: s, source: lab, lab: {}}\n", "lab with lab"),
    ("    - {name: t, source: admin, bootstrap_servers: 'h:9092', mirrors: [{source_cluster: s}]}\n"
     "    - {name: s, source: log-dirs}\n", "between clusters with source: admin"),
    ("    - {name: t, source: log-dirs, mirrors: [{source_cluster: s}]}\n"
     "    - {name: s, source: admin, bootstrap_servers: 'h:9092'}\n", "between clusters with source: admin"),
])
def test_mirror_sources_are_read_like_their_target(clusters, expected):
    err = _error(clusters)
    assert err.field == "systems.kafka[0].mirrors[0].source_cluster" and expected in str(err)


def test_schema_knows_the_kafka_keys():
    schema = estate_schema()
    text = str(schema)
    for key in ("bootstrap_servers", "log_dirs", "brokers", "mirrors", "offset_syncs_location",
                "kafka_follower_lag_max", "kafka_mm2_redelivery_tolerance", "verify_crc"):
        assert key in text


def test_a_mirror_finds_its_source_entry_both_ways():
    entry = "    - {{name: {0}, source: admin, bootstrap_servers: '{0}:9092', mirrors: [{{source_cluster: {1}}}]}}\n"
    estate = parse_estate(HEAD + "systems:\n  kafka:\n" + entry.format("a", "b") + entry.format("b", "a"))
    a, b = estate.clusters("kafka")
    assert a.source_of(a.mirrors[0]) is b and b.source_of(b.mirrors[0]) is a
    assert "b:9092" not in repr(a) and a == a   # the lookup is not a field: no recursion, no comparison of peers
    lone = KafkaCluster(name="c", source="admin", bootstrap_servers="c:9092", mirrors=[{"source_cluster": "a"}])
    assert lone.source_of(lone.mirrors[0]) is None
