"""Normalized Pulsar tables (docs/pulsar/contracts.md) for the failover benchmark, generated directly as Parquet.

Two clusters, east and west, replicate every topic both ways; east publishes 80% of the messages, west 20%, and
each cluster holds its own messages plus the other's copies (replicated FIFO, a fixed number of entries
later). Every `round_every` messages east runs one PIP-33 round (REQUEST, west's RESPONSE = west's last
position, SNAPSHOT). Each topic has the same replicated subscriptions on both clusters; on east a
subscription's markDeletePosition sits at 60..95% of the window with 20..60 individually-acked ranges after it;
east wrote an UPDATE for the newest snapshot below that, and west's cursor is exactly there. So east -> west
rows redeliver (east's acks above the snapshot) and skip nothing, and expected_target_mdp == target_mdp.
One topic in ten is "old Pulsar": copies carry no source-position property (matched by producer + sequence).

Every cursor is read as the collector and its reread stage read it (docs/pulsar/contracts.md, reread.py): read 0
at each cluster's collection (east at T, 10 s after the last entry; west a minute later), then passes 1 and 2,
per topic every cluster in estate order, a few ms apart. Between its reads east's consumers go on acking: each
east subscription's markDeletePosition advances a few entries (short of its first individually-acked range and of
the next snapshot, so no UPDATE the dump lacks is implied); every other cursor stays where it was. So east -> west
compares west's pass-1 read between east's pass-1 and pass-2 reads, with real progress (`unsettled`) to settle.

Messages are laid out with numpy per topic; only markers and cursor rows are Python lists."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

CLUSTERS = ("east", "west")
LEDGER_ENTRIES = 5_000
DELAY = 20.0                  # replication lag in positions: copies keep the origin's order (FIFO)
T0 = 1_760_000_000_000        # publish time of the first entry; one entry every 10 ms
PASSES = (1, 2)               # the reread passes (read 0 is the collection's)
COLLECTION_GAP_MS = 60_000    # west is collected a minute after east
REREAD_AFTER_MS = 1_000       # from west's collection to the first reread
REREAD_STEP_MS = 4            # between two rereads
LATENCY_MS = 2                # from request to answer


@dataclass(frozen=True)
class Spec:
    messages_per_side: int = 10_000_000
    topics: int = 500
    subscriptions: int = 10_000          # in total, the same on both clusters
    round_every: int = 500
    seed: int = 7

    @property
    def per_topic(self) -> int:
        return self.messages_per_side // self.topics

    @property
    def subs_per_topic(self) -> int:
        return max(1, self.subscriptions // self.topics)

    @property
    def collected_ms(self) -> int:
        """East's collection instant: 10 s after the last entry (an UPDATE per subscription follows the layout)."""
        return T0 + 10 * (self.per_topic + self.subs_per_topic) + 10_000

    @property
    def as_of_ms(self) -> int:
        """After the last reread (of the last topic)."""
        return read_instants(self, self.topics - 1)[(CLUSTERS[-1], PASSES[-1])][1] + 500


def read_instants(spec: Spec, t: int) -> dict[tuple[str, int], tuple[int, int]]:
    """(cluster, read) -> (requested, answered) ms for topic number `t`: each cluster's collection, then the
    rereads topic by topic, per pass every cluster in estate order (audit/systems/pulsar/collect/reread.py)."""
    out = {}
    for k, c in enumerate(CLUSTERS):
        at = spec.collected_ms + k * COLLECTION_GAP_MS
        out[(c, 0)] = (at, at + LATENCY_MS)
    at = (spec.collected_ms + (len(CLUSTERS) - 1) * COLLECTION_GAP_MS + REREAD_AFTER_MS
          + t * len(PASSES) * len(CLUSTERS) * REREAD_STEP_MS)
    for n in PASSES:
        for c in CLUSTERS:
            out[(c, n)] = (at, at + LATENCY_MS)
            at += REREAD_STEP_MS
    return out


def _timed(instants: dict, cluster: str, n: int) -> dict:
    requested, answered = instants[(cluster, n)]
    return {"read": n, "read_requested_ms": requested, "read_answered_ms": answered}


def _positions(n: int, ledger_base: int) -> tuple[np.ndarray, np.ndarray]:
    idx = np.arange(n, dtype=np.int64)
    return ledger_base + 3 * (idx // LEDGER_ENTRIES), idx % LEDGER_ENTRIES   # ledger ids are not contiguous


def _topic(spec: Spec, t: int, rng: np.random.Generator) -> dict:
    """One topic: per cluster the sorted keys of every entry, what each entry is, and the subscriptions."""
    rounds = max(1, spec.per_topic // (spec.round_every + 3))
    m = spec.per_topic - 3 * rounds                  # logical messages; a round adds 3 entries on east, 2 on west
    west_origin = rng.random(m) < 0.2
    seq = np.where(west_origin, np.cumsum(west_origin) - 1, np.cumsum(~west_origin) - 1)
    base = np.arange(m, dtype=np.float64)
    r = np.arange(rounds) * spec.round_every + 0.5
    # (key on east, key on west, kind): kinds 10 request(east), 11 response(west), 12 snapshot(east), 0 message
    req_e, req_w = r, r + DELAY
    resp_w = req_w + 0.25
    resp_e, snap_e = resp_w + DELAY, resp_w + DELAY + 0.125
    keys = {"east": np.concatenate([base + DELAY * west_origin, req_e, resp_e, snap_e]),
            "west": np.concatenate([base + DELAY * ~west_origin, req_w, resp_w])}
    out = {"m": m, "rounds": rounds, "west_origin": west_origin, "seq": seq}
    for ci, c in enumerate(CLUSTERS):
        order = np.argsort(keys[c], kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        ledger, entry = _positions(order.size, 1000 + 7 * t + 3_000_000 * ci)
        out[c] = {"order": order, "rank": rank, "ledger": ledger, "entry": entry}
    return out


def _at(side: dict, item: int) -> tuple[int, int]:
    i = side["rank"][item]
    return int(side["ledger"][i]), int(side["entry"][i])


def _entries_table(t: int, topic: str, lay: dict, c: int, old: bool) -> pa.Table:
    """The data messages of one topic on cluster `c` (vectorized)."""
    m, wo = lay["m"], lay["west_origin"]
    me, other = lay[CLUSTERS[c]], lay[CLUSTERS[1 - c]]
    own = ~wo if c == 0 else wo
    rows = me["rank"][:m]
    src_l = other["ledger"][other["rank"][:m]]
    src_e = other["entry"][other["rank"][:m]]
    n = m
    origin_names = pa.array(["east", "west"])
    return pa.table({
        "cluster": pa.DictionaryArray.from_arrays(np.zeros(n, np.int32), pa.array([CLUSTERS[c]])),
        "topic": pa.DictionaryArray.from_arrays(np.zeros(n, np.int32), pa.array([topic])),
        "ledger_id": me["ledger"][rows], "entry_id": me["entry"][rows],
        "producer_name": pa.DictionaryArray.from_arrays(wo.astype(np.int32), pa.array([f"p-east-{t}", f"p-west-{t}"])),
        "sequence_id": lay["seq"], "publish_time_ms": T0 + 10 * rows,
        "replicated_from": pa.DictionaryArray.from_arrays(pa.array(wo.astype(np.int32), mask=own), origin_names),
        "source_position_ledger": pa.array(src_l, mask=own | old),
        "source_position_entry": pa.array(src_e, mask=own | old),
    })


def _marker(cluster, topic, pos, kind, at: int, **kw) -> dict:
    """A marker entry; `at` = its row in the cluster's layout, which dates it like the messages around it."""
    return {"cluster": cluster, "topic": topic, "ledger_id": pos[0], "entry_id": pos[1],
            "producer_name": "pulsar.marker", "sequence_id": 0, "publish_time_ms": T0 + 10 * int(at),
            "marker_type": kind, **kw}


def _schema(name: str) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    from audit.systems.pulsar.transforms.audit import INPUTS

    return to_arrow_schema(INPUTS[name])


def generate(spec: Spec, out: str) -> dict:
    """Write pulsar_entries, pulsar_topics, pulsar_ledgers, pulsar_cursors, pulsar_replication,
    pulsar_subscriptions below `out`. Returns the row counts the audit must produce."""
    rng = np.random.default_rng(spec.seed)
    progress = np.random.default_rng((spec.seed, 1))   # its own stream: the layout stays the same as untimed
    subs_per_topic = spec.subs_per_topic
    tables = {name: [] for name in ("pulsar_topics", "pulsar_ledgers", "pulsar_cursors", "pulsar_replication",
                                    "pulsar_subscriptions")}
    for name in ["pulsar_entries", *tables]:
        os.makedirs(os.path.join(out, name), exist_ok=True)
    writers: dict[str, pq.ParquetWriter] = {}
    markers, entries = [], dict.fromkeys(CLUSTERS, 0)
    for t in range(spec.topics):
        topic = f"persistent://bench/geo/orders-{t}"
        lay = _topic(spec, t, rng)
        for c, cluster in enumerate(CLUSTERS):
            table = _entries_table(t, topic, lay, c, old=t % 10 == 9)
            if cluster not in writers:
                writers[cluster] = pq.ParquetWriter(os.path.join(out, "pulsar_entries", f"{cluster}-data.parquet"),
                                                    table.schema)
            writers[cluster].write_table(table, row_group_size=1 << 20)
        markers += _pip33(topic, lay)
        instants = read_instants(spec, t)
        cursors, updates = _cursors(topic, lay, rng, subs_per_topic, progress, instants)
        markers += updates
        tables["pulsar_cursors"] += cursors
        tail = len(updates) // 2                      # UPDATE markers appended after the laid-out entries
        for c, cluster in enumerate(CLUSTERS):
            side, remote = lay[cluster], CLUSTERS[1 - c]
            last = (int(side["ledger"][-1]), int(side["entry"][-1]) + tail)
            entries[cluster] += side["ledger"].size + tail
            tables["pulsar_topics"].append({
                "cluster": cluster, "topic": topic, "dump_from_ledger": int(side["ledger"][0]), "dump_from_entry": -1,
                "dump_to_ledger": last[0], "dump_to_entry": last[1], "dump_complete": True})
            ids, counts = np.unique(side["ledger"], return_counts=True)
            counts[-1] += tail
            tables["pulsar_ledgers"] += [{"cluster": cluster, "topic": topic, "ledger_id": int(i), "entries": int(n)}
                                         for i, n in zip(ids, counts)]
            tables["pulsar_replication"].append({"cluster": cluster, "topic": topic, "remote_cluster": remote,
                                                 "connected": True, "replication_backlog": 0})
            tables["pulsar_cursors"] += [{
                "cluster": cluster, "topic": topic, "cursor": f"pulsar.repl.{remote}", "kind": "replicator",
                "remote_cluster": remote, "replicated": False, "mark_delete_ledger": last[0],
                "mark_delete_entry": last[1], "read_ledger": last[0], "read_entry": last[1] + 1,
                "individually_deleted": [], **_timed(instants, cluster, n)} for n in (0, *PASSES)]
            tables["pulsar_subscriptions"] += [{"cluster": cluster, "topic": topic, "subscription": f"sub-{j}",
                                                "is_replicated": True} for j in range(subs_per_topic)]
    for w in writers.values():
        w.close()
    pq.write_table(pa.Table.from_pylist(markers, schema=_schema("pulsar_entries")),
                   os.path.join(out, "pulsar_entries", "markers.parquet"))
    for name, rows in tables.items():
        pq.write_table(pa.Table.from_pylist(rows, schema=_schema(name)), os.path.join(out, name, "part-0.parquet"))
    return {"failover_rows": 2 * subs_per_topic * spec.topics, "subscriptions": subs_per_topic * spec.topics,
            "entries": entries, "as_of_ms": spec.as_of_ms}


def _pip33(topic: str, lay: dict) -> list[dict]:
    m, rounds, east, west = lay["m"], lay["rounds"], lay["east"], lay["west"]
    out = []
    for k in range(rounds):
        sid = f"{topic}#{k}"
        req_e, resp_e, snap_e = m + k, m + rounds + k, m + 2 * rounds + k      # item numbers on east
        req_w, resp_w = m + k, m + rounds + k                                  # on west
        w_resp = _at(west, resp_w)
        w_last = (int(west["ledger"][west["rank"][resp_w] - 1]), int(west["entry"][west["rank"][resp_w] - 1]))
        pos = {"cluster": "west", "ledger_id": w_last[0], "entry_id": w_last[1]}
        er, wr = east["rank"], west["rank"]
        out += [_marker("east", topic, _at(east, req_e), 10, er[req_e], snapshot_id=sid, marker_source_cluster="east"),
                _marker("west", topic, _at(west, req_w), 10, wr[req_w], snapshot_id=sid, marker_source_cluster="east",
                        replicated_from="east"),
                _marker("west", topic, w_resp, 11, wr[resp_w], snapshot_id=sid, replicate_to=["east"],
                        marker_clusters=[pos]),
                _marker("east", topic, _at(east, resp_e), 11, er[resp_e], snapshot_id=sid, replicate_to=["east"],
                        replicated_from="west", marker_clusters=[pos]),
                _marker("east", topic, _at(east, snap_e), 12, er[snap_e], snapshot_id=sid, replicate_to=["east"],
                        marker_local_ledger=_at(east, resp_e)[0], marker_local_entry=_at(east, resp_e)[1],
                        marker_clusters=[pos])]
    lay["snapshots"] = [(_at(east, m + rounds + k), w) for k, w in
                        ((k, (o["marker_clusters"][0]["ledger_id"], o["marker_clusters"][0]["entry_id"]))
                         for k, o in enumerate(out[2::5]))]
    return out


def _cursors(topic: str, lay: dict, rng, subs: int, progress, instants: dict) -> tuple[list[dict], list[dict]]:
    """Both clusters' cursors of every subscription, every read, and the UPDATE markers east wrote for them."""
    east, west = lay["east"], lay["west"]
    el, ee = east["ledger"], east["entry"]
    n = el.size
    snaps = lay["snapshots"]                                   # (local on east, west position), in order
    snap_rows = east["rank"][lay["m"] + lay["rounds"]:lay["m"] + 2 * lay["rounds"]]   # their local rows on east
    last_e, last_w = (int(el[-1]), int(ee[-1])), (int(west["ledger"][-1]), int(west["entry"][-1]))
    cursors, markers = [], []
    for j in range(subs):
        mdp_i = int(rng.integers(int(0.6 * n), int(0.95 * n)))
        k = int(rng.integers(20, 61))
        cuts = np.unique(rng.integers(mdp_i + 2, n, size=4 * k))[:2 * k]
        cuts = cuts[:cuts.size // 2 * 2]
        lo, hi = cuts[0::2], cuts[1::2]
        ranges = [{"from_ledger": a, "from_entry": b, "to_ledger": c, "to_entry": d} for a, b, c, d in zip(
            el[lo].tolist(), ee[lo].tolist(), el[hi].tolist(), ee[hi].tolist())]
        read_i = min(n - 1, int(cuts[-1]) + 1) if cuts.size else mdp_i + 1
        mdp = (int(el[mdp_i]), int(ee[mdp_i]))
        below = [w for local, w in snaps if local <= mdp]
        west_mdp = below[-1] if below else (int(west["ledger"][0]), -1)
        # east's MDP per read: a few entries on each time, kept below the first acked range (reaching it would
        # merge the range) and the next snapshot (passing it writes an UPDATE the dump does not hold)
        nxt = int(np.searchsorted(snap_rows, mdp_i, side="right"))
        limit = min(int(lo[0]) if lo.size else read_i, int(snap_rows[nxt]) if nxt < snap_rows.size else n) - 1
        mdps = [mdp_i]
        for _ in PASSES:
            mdps.append(min(limit, mdps[-1] + int(progress.integers(1, 5))))
        name = f"sub-{j}"
        for r, i in zip((0, *PASSES), mdps):
            cursors.append({"cluster": "east", "topic": topic, "cursor": name, "kind": "subscription",
                            "remote_cluster": None, "replicated": True, "mark_delete_ledger": int(el[i]),
                            "mark_delete_entry": int(ee[i]), "read_ledger": int(el[read_i]),
                            "read_entry": int(ee[read_i]), "individually_deleted": ranges,
                            **_timed(instants, "east", r)})
            cursors.append({"cluster": "west", "topic": topic, "cursor": name, "kind": "subscription",
                            "remote_cluster": None, "replicated": True, "mark_delete_ledger": west_mdp[0],
                            "mark_delete_entry": west_mdp[1], "read_ledger": None, "read_entry": None,
                            "individually_deleted": [], **_timed(instants, "west", r)})
        if below:   # the UPDATE east wrote, and its copy on west (after everything else)
            cl = [{"cluster": "west", "ledger_id": west_mdp[0], "entry_id": west_mdp[1]}]
            markers += [_marker("east", topic, (last_e[0], last_e[1] + 1 + j), 13, n + j, marker_subscription=name,
                                marker_clusters=cl),
                        _marker("west", topic, (last_w[0], last_w[1] + 1 + j), 13, west["ledger"].size + j,
                                marker_subscription=name, marker_clusters=cl, replicated_from="east")]
    return cursors, markers
