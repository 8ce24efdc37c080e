"""Old brokers through the real collector and the loopback admin server: west runs 2.8.1, whose entry answers lack
the headers of apache/pulsar#11443 and which has no GET of replicatedSubscriptionStatus (apache/pulsar#12891).
The status is "not available on this broker" (no gap), and what the entries cannot say is reported as not
covered, by topic and cluster, instead of being judged: no false findings."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from audit.collectors.base import DirSink
from audit.systems.pulsar.collect.admin_client import AdminResponse
from audit.systems.pulsar.collect.collector import PulsarCollector, status_endpoint_missing
from audit.systems.pulsar.config import PulsarCluster
from audit.config.secrets import SecretResolver
from audit.systems.pulsar.formats.dump_chunk import decode_chunk_file
from lab.pulsar.admin_server import serve_pulsar_admin
from lab.pulsar.runner import lab_world
from spark_jobs import run

AS_OF_MS = 1_795_440_000_000
# quiet and a few scenarios: fewer entries over HTTP, still replicated subscriptions on all three clusters
SCENARIOS = ["healthy", "ack-holes", "three-clusters"]
LAB = {"seed": 7, "traffic": "quiet", "scenarios": SCENARIOS, "broker_versions": {"west": "2.8.1"}}


def _collect(world, cluster: str, raw: Path):
    namespaces = sorted({t.name.split("//")[1].rsplit("/", 1)[0] for t in world.topics_of(cluster)})
    with serve_pulsar_admin(world, cluster) as url:
        spec = PulsarCluster(name=cluster, source="admin", admin_url=url, namespaces=tuple(namespaces))
        # the loopback server answers with the world as of AS_OF_MS: that is when every read happens
        return PulsarCollector(now_ms=lambda: AS_OF_MS).collect(spec, DirSink(raw / "pulsar" / cluster),
                                                                SecretResolver(environ={}))


def _rows(path: Path) -> list[dict]:
    return ds.dataset(str(path), format="parquet").to_table().to_pylist() if path.exists() else []


@pytest.fixture(scope="module")
def old(spark, tmp_path_factory):
    """The lab with west on 2.8.1, collected over loopback, normalized and audited once."""
    tmp = tmp_path_factory.mktemp("old-broker")
    world, truth = lab_world(LAB, AS_OF_MS)
    raw = tmp / "raw"
    reports = {c: _collect(world, c, raw) for c in ("east", "west", "south")}
    run.run_stage(spark, "pulsar", "normalize", str(raw), str(tmp / "tables"))
    run.run_stage(spark, "pulsar", "audit", str(tmp / "tables"), str(tmp), run_id="r", as_of_ms=AS_OF_MS,
                  thresholds=run.thresholds(None, []))
    return world, truth, reports, tmp


def test_old_broker_is_reported_not_judged(old):
    world, _, reports, tmp = old
    raw = tmp / "raw"
    assert all(r.gaps == [] for r in reports.values())     # a missing endpoint is no error
    replicated = sum(1 for t in world.topics_of("west") for s in t.subscriptions.values() if s.replicated)
    assert reports["west"].counts["replicated_status_unavailable"] == replicated > 0
    assert "replicated_status_unavailable" not in reports["east"].counts
    assert not list((raw / "pulsar" / "west").rglob("replicated-status.json"))
    chunks = sorted((raw / "pulsar" / "west").rglob("dump/*/*.jsonl"))
    records = [r for c in chunks for r in decode_chunk_file(c.read_bytes(), str(c), "/".join(c.parts[-2:]))]
    assert records and not any(r.metadata_headers for r in records)
    assert all(r.replicated_from is None and r.marker_type is None for r in records)

    quarantine = [q for q in _rows(tmp / "tables" / "quarantine") if q["system"] == "pulsar"]
    topics = sorted({"persistent://" + c.relative_to(raw / "pulsar" / "west" / "topics").as_posix().split("/dump/")[0]
                     for c in chunks})
    assert sorted(q["reason"].split(" on cluster ")[0] for q in quarantine) == topics
    for q in quarantine:
        assert q["cluster"] == "west" and "on cluster west: " in q["reason"], q
        assert "apache/pulsar#11443" in q["reason"] and "marker cannot be told from a message" in q["reason"]
    entries = _rows(tmp / "tables" / "pulsar_entries")
    assert entries and not [e for e in entries if e["cluster"] == "west"]
    gaps = [g for g in _rows(tmp / "tables" / "pulsar_entry_gaps") if g["cluster"] == "west"]
    assert len(gaps) == len(records) and {g["status"] for g in gaps} == {200}


def test_old_broker_raises_no_false_findings(old):
    # a window whose entries were not judged (here all of them: an old broker) vouches for nothing
    _, truth, _, tmp = old
    expected = {(f["check"], f["cluster"], f["topic"], f.get("subscription"), f.get("target_cluster"))
                for f in truth["findings"]}
    keys = set()
    for f in _rows(tmp / "findings" / "violations" / "system=pulsar"):
        ev = json.loads(f["evidence"])
        keys.add((f["check"], f["cluster"], ev["topic"], ev.get("subscription"), ev.get("target_cluster")))
    assert keys <= expected, keys - expected     # what was judged is right; the rest is a coverage gap


def test_before_the_status_post_the_endpoint_is_jettys_404_and_still_no_gap(tmp_path):
    world, _ = lab_world({**LAB, "broker_versions": {"west": "2.6.4"}}, AS_OF_MS)
    report = _collect(world, "west", tmp_path)
    assert report.gaps == [] and report.counts["replicated_status_unavailable"] > 0


@pytest.mark.parametrize("status, ctype, body, missing", [
    (405, "application/json", b'{"reason": "Method Not Allowed"}', True),     # 2.7.3 to 2.9: POST only
    (404, "text/html", b"<html><title>Error 404 Not Found</title></html>", True),   # before: no such resource
    (404, None, b"", True),
    (404, "application/json", b'{"reason": "Subscription not found"}', False),   # the broker's own answer
    (404, "application/json", b'{"reason": "Topic persistent://t/ns/x not found"}', False),
    (500, "application/json", b'{"reason": "boom"}', False),
])
def test_status_endpoint_missing(status, ctype, body, missing):
    resp = AdminResponse("http://b/x", status, ctype, body, (), f"HTTP {status}")
    assert status_endpoint_missing(resp) is missing
