"""The Pulsar lab's raw evidence follows docs/pulsar/contracts.md and looks like what real brokers send."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from audit.systems.pulsar.config import PulsarCluster, PulsarDump
from audit.contracts import RereadRequest
from audit.systems.pulsar.domain.rangeset import parse_individually_deleted
from audit.systems.pulsar.formats.entry import EntryRecord, decode_entry_line, dump_lines
from audit.systems.pulsar.formats.read_instant import decode_read_instant
from audit.systems.pulsar.formats.repl_status import decode_replicated_status
from audit.systems.pulsar.formats.stats import decode_topic_stats
from audit.systems.pulsar.formats.stats_internal import decode_stats_internal
from lab.pulsar.emit import emit_cluster
from lab.pulsar.runner import UnknownLabCluster, lab_world, reread
from lab.pulsar.runner import collect as collect_lab_pulsar_cluster
from lab.pulsar.world import build_world
from tests.lab.sinks import DictSink

AS_OF = 1_760_000_000_000
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "real"
HOLES = "topics/lab/geo/orders-ack-holes"


def emit_all(lab, as_of=AS_OF):
    world = build_world(lab, as_of)
    out = {}
    for c in world.cluster_names:
        sink = DictSink()
        emit_cluster(world, c, sink)
        out[c] = dict(sink)
    return out


@pytest.fixture(scope="module")
def raw():
    world = lab_world({"seed": 7}, AS_OF)[0]
    out = {}
    for c in world.cluster_names:
        sink = DictSink()
        collect_lab_pulsar_cluster(PulsarCluster(name=c, source="lab", lab={"seed": 7}), sink, None, AS_OF)
        out[c] = dict(sink)
    return out


def test_same_seed_same_bytes_other_seed_other_world():
    a, b = emit_all({"seed": 3, "messages": 40}), emit_all({"seed": 3, "messages": 40})
    assert a == b
    assert emit_all({"seed": 4, "messages": 40})["east"] != a["east"]


def test_default_world_builds_and_emits_every_cluster():
    payloads = emit_all({"seed": 11})
    assert sorted(payloads) == ["east", "south", "west"]


def test_default_world_size(raw):
    for c in ("east", "west"):
        entries = sum(json.loads(v)["entries_expected"] for k, v in raw[c].items() if k.endswith("dump.json"))
        total = sum(decode_stats_internal(v, k).entries_added for k, v in raw[c].items()
                    if k.endswith("stats-internal.json"))
        assert 1000 <= entries and 10_000 <= total <= 40_000


def test_stats_internal_has_the_real_key_set(raw):
    real = json.loads((FIXTURES / "pulsar-stats-internal-01.json").read_text())
    real = real["transactionLogStats"]["managedLedgerInternalStats"]
    real_cursor = next(iter(real["cursors"].values()))
    doc = json.loads(raw["east"][f"{HOLES}/stats-internal.json"])
    assert list(doc)[:len(real)] == list(real) and list(doc)[len(real):] == ["schemaLedgers", "compactedLedger"]
    for name, cursor in doc["cursors"].items():
        assert [k for k in cursor if k != "active"] == list(real_cursor), name
    assert list(doc["ledgers"][0]) == ["ledgerId", "entries", "size", "offloaded", "underReplicated"]
    assert b": " not in raw["east"][f"{HOLES}/stats-internal.json"]  # compact, as the broker's REST answer


def test_stats_internal_ledgers_cursors_and_spellings(raw):
    for cluster, payloads in raw.items():
        for key, body in payloads.items():
            if not key.endswith("stats-internal.json"):
                continue
            si = decode_stats_internal(body, key)
            doc = json.loads(body)
            *closed, current = doc["ledgers"]
            assert (current["entries"], current["size"]) == (0, 0)  # the open ledger shows 0
            assert doc["numberOfEntries"] == sum(lg["entries"] for lg in closed) + doc["currentLedgerEntries"]
            assert si.last_confirmed_entry.ledger_id == current["ledgerId"]
            assert [lg["ledgerId"] for lg in doc["ledgers"]] == sorted(lg["ledgerId"] for lg in doc["ledgers"])
            for name, c in si.cursors.items():
                text = doc["cursors"][name]["individuallyDeletedMessages"]
                assert parse_individually_deleted(text, key) == c.individually_deleted
                if key.startswith(HOLES) and len(c.individually_deleted) > 1:
                    assert "], (" in text  # Guava TreeRangeSet spelling
                elif len(c.individually_deleted) > 1:
                    assert "], (" not in text and "],(" in text
                if c.kind == "replicator":
                    assert c.remote_cluster in raw and c.remote_cluster != cluster and not c.replicated
                else:
                    assert c.replicated == (name != "local-metrics")


def test_stats_replication_section_and_replicated_status(raw):
    stats = decode_topic_stats(raw["east"]["topics/lab/geo/orders-disconnected/stats.json"], "s")
    west = stats.replication["west"]
    assert west.connected is False and west.outbound_connection is None and west.replication_backlog > 0
    assert stats.subscriptions["orders-processor"].is_replicated is True
    one_way = decode_topic_stats(raw["west"]["topics/lab/geo/orders-one-way/stats.json"], "s")
    assert dict(one_way.replication) == {}
    key = "topics/lab/geo3/payments/subscriptions/payments%3Aeu/replicated-status.json"
    assert decode_replicated_status(raw["south"][key], key) == {"persistent://lab/geo3/payments": True}
    assert not [k for k in raw["east"] if "local-metrics" in k]  # only replicated subscriptions


def test_dump_chunks_cover_the_window_line_by_line(raw):
    for cluster, payloads in raw.items():
        for key, body in payloads.items():
            if not key.endswith("/dump.json"):
                continue
            folder = key[:-len("/dump.json")]
            window = json.loads(body)
            si = decode_stats_internal(payloads[f"{folder}/stats-internal.json"], key)
            floor = min(c.mark_delete for c in si.cursors.values() if c.kind == "replicator" or c.replicated)
            assert window["from"] == str(floor) and window["to"] == str(si.last_confirmed_entry)
            positions = []
            for chunk_key in sorted(k for k in payloads if k.startswith(f"{folder}/dump/")):
                ledger, span = chunk_key.rsplit("/", 2)[1:]
                first, last = (int(x) for x in span[:-len(".jsonl")].split("-"))
                lines = [decode_entry_line(line, chunk_key) for _, line in dump_lines(payloads[chunk_key])]
                assert [(r.ledger_id, r.entry_id) for r in lines] == [(int(ledger), e) for e in range(first, last + 1)]
                positions += [(r.ledger_id, r.entry_id) for r in lines]
                for line_text, rec in zip(payloads[chunk_key].splitlines(), lines):
                    check_line(json.loads(line_text), rec)
            assert positions == sorted(positions) and len(positions) == window["entries_expected"]
            assert window["complete"] and window["entries_read"] == len(positions)
            assert sum(lg["entries"] for lg in window["ledgers"]) == len(positions)


def check_line(doc: dict, rec: EntryRecord) -> None:
    assert list(doc) == ["ledger_id", "entry_id", "status", "content_type", "headers", "body_b64"]
    assert doc["status"] == 200 and doc["content_type"] == "application/octet-stream"
    assert all(name.startswith("X-Pulsar-") for name in doc["headers"])
    assert rec.publish_time_ms is not None and rec.body_size == len(base64.b64decode(doc["body_b64"]))
    to = doc["headers"].get("X-Pulsar-replicated-to")
    assert to is None or isinstance(to, str) or (isinstance(to, list) and len(to) > 1)
    if rec.marker_type is not None:
        assert rec.producer_name == "pulsar.marker" and rec.sequence_id == 0 and rec.marker["name"]
    else:
        assert rec.producer_name != "pulsar.marker"


def test_dump_respects_chunk_size_and_cap():
    world = lab_world({"seed": 7}, AS_OF)[0]
    sink = DictSink()
    report = emit_cluster(world, "west", sink, PulsarDump(chunk_entries=7, max_entries_per_topic=20))
    chunks = [k for k in sink if "/dump/" in k]
    assert chunks and all(len(dump_lines(sink[k]).__next__()) and sink[k].count(b"\n") <= 7 for k in chunks)
    capped = [json.loads(v) for k, v in sink.items() if k.endswith("dump.json") and not json.loads(v)["complete"]]
    assert capped and all(d["entries_read"] == 20 and d["reason"] for d in capped)
    assert len(report.gaps) == len(capped)


def test_unknown_lab_cluster_names_the_known_ones():
    with pytest.raises(UnknownLabCluster, match="'north'.*east, west, south"):
        collect_lab_pulsar_cluster(PulsarCluster(name="north", source="lab", lab={"seed": 7}), DictSink(), None, AS_OF)


# -- read instants: each cluster at its own instant, then the rereads ---------------------------------------------
def _instants(payloads):
    return {k[:-len(".read.json")]: decode_read_instant(v, k) for k, v in payloads.items() if k.endswith(".read.json")}


def test_every_admin_body_has_its_read_instant_before_as_of(raw):
    for cluster, payloads in raw.items():
        instants = _instants(payloads)
        bodies = [k for k in payloads if k.endswith(("stats-internal.json", "stats.json", "replicated-status.json",
                                                     "message-ttl.json"))]
        assert sorted(instants) == sorted(bodies)
        for key, at in instants.items():
            assert at.requested_at_ms <= at.answered_at_ms < AS_OF, key
            assert at.url.startswith(f"lab://{cluster}/admin/v2/persistent/")   # 3.0.12: the topic's applied TTL
        for key in (k for k in payloads if k.endswith("/dump.json")):
            doc, folder = json.loads(payloads[key]), key[:-len("/dump.json")]
            stats = instants[f"{folder}/stats.json"]
            if doc["entries_read"]:   # the dump follows the topic's stats, inside its collection
                assert stats.answered_at_ms < doc["read_started_at_ms"] <= doc["read_finished_at_ms"]
            else:
                assert doc["read_started_at_ms"] is doc["read_finished_at_ms"] is None


def test_clusters_are_collected_a_gap_apart_while_traffic_goes_on(raw):
    first = {c: min(at.requested_at_ms for at in _instants(p).values()) for c, p in raw.items()}
    last = {c: max(at.answered_at_ms for at in _instants(p).values()) for c, p in raw.items()}
    assert first["west"] - first["east"] == first["south"] - first["west"] == 60_000
    assert last["east"] < first["west"] and last["west"] < first["south"]
    # what east's collection saw is not what east holds at as_of: producers kept going
    world = lab_world({"seed": 7}, AS_OF)[0]
    si = decode_stats_internal(raw["east"][f"{HOLES}/stats-internal.json"], "si")
    assert si.entries_added < len(world.topic("east", "persistent://lab/geo/orders-ack-holes").ml.entries)


def _rereads(lab, clusters=("east", "west", "south")):
    sinks = {c: DictSink() for c in clusters}
    models = tuple(PulsarCluster(name=c, source="lab", lab=lab) for c in clusters)
    for m in models:
        collect_lab_pulsar_cluster(m, sinks[m.name], None, AS_OF)
    collected = {c: sorted(s) for c, s in sinks.items()}
    rereads = {c: DictSink() for c in clusters}
    reports = reread(RereadRequest(models, lambda n: rereads[n], lambda n: collected[n], None, AS_OF, None))
    return {c: dict(s) for c, s in rereads.items()}, reports, collected


def test_rereads_read_every_collected_topic_twice_close_together():
    out, reports, collected = _rereads({"seed": 7})
    topics = {c: sorted(k[:-len("/stats-internal.json")] for k in keys if k.endswith("/stats-internal.json"))
              for c, keys in collected.items()}
    for c, payloads in out.items():
        assert sorted(payloads) == sorted(f"{t}/rereads/{n}/stats-internal.json{s}" for t in topics[c]
                                          for n in (1, 2) for s in ("", ".read.json"))
        assert reports[c].counts == {"rereads": 2 * len(topics[c])} and reports[c].gaps == []
        for key, body in payloads.items():
            if not key.endswith(".read.json"):
                decode_stats_internal(body, key)
    # one topic: every cluster once, then every cluster again, a few ms apart, after every collection
    folder = "topics/lab/geo3/payments"
    at = {(n, c): decode_read_instant(out[c][f"{folder}/rereads/{n}/stats-internal.json.read.json"], c)
          for c in out for n in (1, 2)}
    order = sorted(at, key=lambda k: at[k].requested_at_ms)
    assert order == [(1, "east"), (1, "west"), (1, "south"), (2, "east"), (2, "west"), (2, "south")]
    assert all(at[a].answered_at_ms <= at[b].requested_at_ms for a, b in zip(order, order[1:]))
    assert at[order[-1]].answered_at_ms - at[order[0]].requested_at_ms < 50
    world = lab_world({"seed": 7}, AS_OF)[0]
    assert at[order[0]].requested_at_ms > max(c.dump_at[1] for c in world.reads.collections.values())


def test_a_topic_the_collection_did_not_store_is_not_reread():
    sinks = {c: DictSink() for c in ("east", "west")}
    models = tuple(PulsarCluster(name=c, source="lab", lab={"seed": 7}) for c in sinks)
    out = {c: DictSink() for c in sinks}
    keep = ["topics/lab/geo/orders-healthy/stats-internal.json"]
    reports = reread(RereadRequest(models, lambda n: out[n], lambda n: keep, None, AS_OF, None))
    assert sorted(out["east"]) == sorted(f"topics/lab/geo/orders-healthy/rereads/{n}/stats-internal.json{s}"
                                         for n in (1, 2) for s in ("", ".read.json"))
    assert reports["east"].counts == {"rereads": 2}


_DIGEST = """
import hashlib, sys
from audit.systems.pulsar.config import PulsarCluster
from audit.contracts import RereadRequest
from lab.pulsar.runner import collect, reread
sinks = {}
class Sink(dict):
    def put(self, k, v): self[k] = v
models = tuple(PulsarCluster(name=c, source="lab", lab={"seed": 3, "messages": 40}) for c in ("east", "west", "south"))
for m in models:
    sinks[m.name] = Sink(); collect(m, sinks[m.name], None, 1_760_000_000_000)
collected = {c: sorted(s) for c, s in sinks.items()}
reread(RereadRequest(models, lambda n: sinks[n], lambda n: collected[n], None, 1_760_000_000_000, None))
h = hashlib.sha256()
for c in sorted(sinks):
    for k in sorted(sinks[c]):
        h.update(k.encode()); h.update(sinks[c][k])
print(h.hexdigest())
"""


def test_same_mapping_same_bytes_in_other_processes():
    """The reread task rebuilds the world in another process: collection and rereads must not depend on it."""
    root = Path(__file__).resolve().parents[3]
    digests = {subprocess.run([sys.executable, "-c", _DIGEST], cwd=root, capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(digests) == 1
