"""The Pulsar lab's raw evidence follows docs/pulsar/contracts.md and looks like what real brokers send."""
from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest

from audit.config.pulsar import PulsarCluster, PulsarDump
from audit.domain.pulsar.rangeset import parse_individually_deleted
from audit.formats.pulsar.entry import EntryRecord, decode_entry_line, dump_lines
from audit.formats.pulsar.repl_status import decode_replicated_status
from audit.formats.pulsar.stats import decode_topic_stats
from audit.formats.pulsar.stats_internal import decode_stats_internal
from audit.lab.pulsar.emit import emit_cluster
from audit.lab.pulsar.runner import UnknownLabCluster, lab_world
from audit.lab.pulsar.runner import collect as collect_lab_pulsar_cluster
from audit.lab.pulsar.world import build_world
from tests.lab.pulsar.payload_oracle import DictSink

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


def test_default_world_builds_and_emits_every_cluster_quickly():
    start = time.perf_counter()
    payloads = emit_all({"seed": 11})
    assert time.perf_counter() - start < 5.0  # about a second on a laptop
    assert sorted(payloads) == ["east", "south", "west"]


def test_default_world_size(raw):
    for c in ("east", "west"):
        entries = sum(json.loads(v)["entries_expected"] for k, v in raw[c].items() if k.endswith("dump.json"))
        total = sum(decode_stats_internal(v, k).entries_added for k, v in raw[c].items()
                    if k.endswith("stats-internal.json"))
        assert 1000 <= entries and 2000 <= total <= 10_000


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
