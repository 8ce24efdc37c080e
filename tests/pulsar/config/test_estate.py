"""The systems.pulsar section: a full admin cluster, lab clusters, and a clear error for each bad field."""
import pytest

from audit.config import EstateError
from audit.config.estate import parse_estate
from audit.config.model import SecretRef
from audit.systems.pulsar.config import PulsarDump

HEAD = "estate: geo\nstore: {uri: file:///tmp/replaudit-x}\n"

ADMIN = HEAD + """\
thresholds:
  pulsar_replicator_backlog_max: 500
  pulsar_snapshot_max_age: 10m
systems:
  pulsar:
    - name: us-east
      source: admin
      admin_url: https://east.example.com:8443
      token: {airflow_conn: pulsar_east}
      namespaces: [public/orders]
      topics: ["persistent://public/billing/invoices"]
      dump: {concurrency: 4, chunk_entries: 500, max_entries_per_topic: 2000}
      timeouts: {connect_s: 2, request_s: 20}
      tls_verify: false
    - name: us-west
      source: lab
      lab: {seed: 3}
"""


def test_full_pulsar_section():
    estate = parse_estate(ADMIN)
    east, west = estate.clusters("pulsar")
    assert east.name == "us-east" and east.source == "admin"
    assert east.admin_url == "https://east.example.com:8443"
    assert east.token == SecretRef(airflow_conn="pulsar_east", where="systems.pulsar[0].token")
    assert east.namespaces == ("public/orders",)
    assert east.topics == ("persistent://public/billing/invoices",)
    assert east.dump == PulsarDump(concurrency=4, chunk_entries=500, max_entries_per_topic=2000)
    assert (east.timeouts.connect_s, east.timeouts.request_s) == (2, 20)
    assert east.tls_verify is False and east.lab is None
    assert west.source == "lab" and west.lab == {"seed": 3} and west.admin_url is None
    assert estate.thresholds.pulsar_replicator_backlog_max == 500
    assert estate.thresholds.pulsar_snapshot_max_age_s == 600
    assert estate.cluster("pulsar", "us-west") is west


def _error(text: str) -> EstateError:
    with pytest.raises(EstateError) as info:
        parse_estate(HEAD + "systems:\n  pulsar:\n" + text)
    return info.value


@pytest.mark.parametrize("text, field, expected", [
    ("    - {name: e, source: admin, topics: ['persistent://a/b/c']}\n",
     "systems.pulsar[0].admin_url", "admin REST URL"),
    ("    - {name: e, source: admin, admin_url: 'http://h:8080'}\n", "systems.pulsar[0]", "namespaces and/or topics"),
    ("    - {name: e, source: admin, admin_url: 'http://h:8080', topics: ['orders']}\n",
     "systems.pulsar[0].topics[0]", "persistent://tenant/namespace/topic"),
    ("    - {name: e, source: admin, admin_url: 'http://h:8080', namespaces: [public]}\n",
     "systems.pulsar[0].namespaces[0]", "tenant/namespace"),
    ("    - {name: e, source: admin, admin_url: 'http://h:8080', topics: ['persistent://a/b/c'], token: s3cr3t}\n",
     "systems.pulsar[0].token", "{env: NAME} or {airflow_conn: ID"),
    ("    - {name: e, source: lab, admin_url: 'http://h:8080'}\n", "systems.pulsar[0].admin_url", "no admin_url"),
    ("    - {name: e, source: kafka}\n", "systems.pulsar[0].source", "one of"),
    ("    - {name: e, source: lab, dump: {concurrency: 0}}\n", "systems.pulsar[0].dump.concurrency", ">= 1"),
    ("    - {name: e, source: lab, lab: {seed: 1}}\n    - {name: w, source: lab, lab: {seed: 2}}\n",
     "systems.pulsar", "same lab mapping"),
    ("    - {name: e, source: lab}\n    - {name: e, source: lab}\n", "systems.pulsar[1].name", "unique"),
    ("    - {name: e, source: lab, colour: red}\n", "systems.pulsar[0].colour", "unknown key"),
])
def test_bad_pulsar_fields_name_the_field(text, field, expected):
    err = _error(text)
    assert err.field == field, str(err)
    assert expected in str(err)


def test_cluster_names_are_unique_across_systems():
    with pytest.raises(EstateError) as info:
        parse_estate(HEAD + "systems:\n  bookkeeper:\n    - {name: east, source: lab}\n"
                            "  pulsar:\n    - {name: east, source: lab}\n")
    assert info.value.field == "systems.pulsar[0].name"
    assert "unique across systems" in str(info.value)
