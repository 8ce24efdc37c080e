"""MirrorMaker 2 flows: sparse offset syncs by the documented rule, a restart that copies again, the pre-3.4.1
translation overshooting past a transaction marker, and failover counts that the evidence confirms."""
from __future__ import annotations

import base64
import json

from audit.systems.kafka.formats.mm2 import decode_checkpoint, decode_offset_sync
from tests.lab.kafka.helpers import collect, findings


def _records(raw: dict, key: str, decode, with_time: bool = False) -> list:
    doc = json.loads(raw[key])
    out = [decode(base64.b64decode(r["key_b64"]), base64.b64decode(r["value_b64"]), key) for r in doc["records"]]
    return list(zip(out, (r["timestamp"] for r in doc["records"]))) if with_time else out


def _generations(syncs, restart_ms=None):
    """(upstream, downstream[, timestamp]) syncs split at a rewind, and at the first sync after a restart."""
    out, restarted = [], False
    for s in syncs:
        after = restart_ms is not None and len(s) > 2 and s[2] >= restart_ms and not restarted
        restarted = restarted or after
        if not out or s[0] < out[-1][-1][0] or s[1] < out[-1][-1][1] or after:
            out.append([])
        out[-1].append(s)
    return out


def test_sparse_syncs_follow_offset_lag_max():
    raw, _, truth = collect({"seed": 7}, "dr")
    (restart,) = truth["mirrors"][0]["restarts_ms"]
    per = {}
    for s, at in _records(raw, "mm2/primary/offset-syncs.json", decode_offset_sync, with_time=True):
        per.setdefault((s.topic, s.partition), []).append((s.upstream_offset, s.downstream_offset, at))
    for key, items in per.items():
        gens = _generations(items, restart)
        assert len(gens) == 2, key           # the restarted task's first sync begins a new lifetime
        for gen in gens:
            # 3.4.1+: a sync when the downstream offset is offset.lag.max past the last sync + 1 (no upstream gaps)
            assert all(b[1] - a[1] == 101 for a, b in zip(gen, gen[1:])), key
        # what was copied after the last offset commit was copied again: the new lifetime starts further down
        assert gens[1][0][1] - gens[1][0][0] > gens[0][-1][1] - gens[0][-1][0]


def test_failover_counts_match_the_evidence():
    raw, _, truth = collect({"seed": 7}, "dr")
    groups = json.loads(raw["mm2/primary/groups.json"])
    # target, source, target again at one virtual instant: each read's instants are the document's
    assert {groups[f"{side}_read_{end}_at_ms"] for side in ("target", "source", "target_after")
            for end in ("started", "finished")} == {groups["read_started_at_ms"]} == {groups["read_finished_at_ms"]}
    assert groups["target_after"] == groups["target"]
    (restart,) = truth["mirrors"][0]["restarts_ms"]
    syncs = {}
    for s, at in _records(raw, "mm2/primary/offset-syncs.json", decode_offset_sync, with_time=True):
        syncs.setdefault((s.topic, s.partition), []).append((s.upstream_offset, s.downstream_offset, at))
    target = {(g, o["topic"], o["partition"]): o["offset"] for g, offs in groups["target"].items() for o in offs}
    source = {(g, o["topic"], o["partition"]): o["offset"] for g, offs in groups["source"].items() for o in offs}
    ends = {(e["topic"], e["partition"]): e for e in groups["target_end_offsets"]}
    checked = 0
    for row in truth["mm2_failover"]:
        key = (row["group"], row["remote_topic"], row["partition"])
        assert row["target_committed"] == target.get(key)
        assert row["upstream_committed"] == source[(row["group"], row["topic"], row["partition"])]
        gen = [g[:2] for g in _generations(syncs[(row["topic"], row["partition"])], restart)[-1]]
        d, u = row["target_committed"], row["upstream_committed"]
        if d is None or d < gen[0][1]:
            continue                # the mapping below the latest generation is not linear (copied twice)
        end = ends[(row["remote_topic"], row["partition"])]
        # no upstream gaps: between two syncs of one generation the copies are one to one
        mapped = lambda x: max(s for s in gen if s[1] <= x)[0] + (x - max(s for s in gen if s[1] <= x)[1])
        redelivered = sum(1 for x in range(max(d, end["log_start"]), end["end"]) if mapped(x) < u)
        assert row["redelivered"] == redelivered, row
        assert row["skipped"] == 0
        checked += 1
    assert checked >= 5


def test_pre_35_translation_overshoots_past_the_marker():
    raw, _, truth = collect({"seed": 7}, "dr-legacy")
    (flow,) = truth["mirrors"]
    assert flow["mm2_version"] == "3.4.0"
    ahead = findings(truth, "kafka.mm2_target_group_ahead")
    assert {(f["group"], f["partition"]) for f in ahead} == {("settlement", 0), ("settlement", 1)}
    groups = json.loads(raw["mm2/primary/groups.json"])
    target = {o["partition"]: o["offset"] for o in groups["target"]["settlement"]}
    source = {o["partition"]: o["offset"] for o in groups["source"]["settlement"] if o["topic"] == "ledger-txn"}
    last = {}
    for cp in _records(raw, "mm2/primary/checkpoints.json", decode_checkpoint):
        if cp.group == "settlement":
            last[cp.partition] = cp
    for f in ahead:
        p = f["partition"]
        cp = last[p]
        # the group's last checkpoint, synced to the target, translated its offset after the final marker one
        # too far: the record at that offset went to the downstream offset just below, as the sync for it says
        assert cp.upstream_offset == source[p] and target[p] == cp.downstream_offset
        syncs = {(s.upstream_offset, s.downstream_offset) for s in _records(
            raw, "mm2/primary/offset-syncs.json", decode_offset_sync) if s.partition == p}
        assert (source[p], target[p] - 1) in syncs
        assert f["offset_from"] == f["offset_to"] == target[p] - 1
        row = next(r for r in truth["mm2_failover"] if r["group"] == "settlement" and r["partition"] == p)
        assert row["skipped"] == f["entry_count"] == 1 and row["resume_at"] == target[p] - 1


def test_35_translation_never_skips():
    _, _, truth = collect({"seed": 7}, "dr")
    assert all(r["skipped"] == 0 for r in truth["mm2_failover"])
    assert any(r["redelivered"] > 0 for r in truth["mm2_failover"])
