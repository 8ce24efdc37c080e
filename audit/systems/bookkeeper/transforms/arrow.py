"""ledger_state Arrow batches -> (cluster, LedgerMetadata, answers) without building a dict per struct:
columns are flattened once per batch and sliced by list offsets (several times faster than to_pylist)."""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from audit.systems.bookkeeper.domain.model import LedgerMetadata, Segment, SequenceGroup
from audit.systems.bookkeeper.domain.evidence import ENTRIES_OF_LEDGER, READ_PROBE
from audit.systems.bookkeeper.domain.replicas import NO_SUCH_LEDGER, OK, BookieAnswer, better_answer

_SCALARS = ("cluster", "ledger_id", "format_version", "state", "ensemble_size", "write_quorum", "ack_quorum",
            "last_entry_id", "length", "ctime", "ctoken", "digest_type", "has_password")


def _lists(arr: pa.Array) -> tuple[list[int], pa.Array, list[bool]]:
    """(offsets, child values, is_null) of a list column."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.offsets.to_pylist(), arr.values, arr.is_null().to_pylist()


def iter_ledgers(batch: pa.RecordBatch) -> Iterator[tuple[str, LedgerMetadata, dict[str, BookieAnswer], int | None]]:
    """(cluster, metadata, answers by bookie, the znode's mtime or None) per ledger row."""
    cols = {name: batch.column(name).to_pylist() for name in _SCALARS}
    mtimes = (batch.column("znode_mtime").to_pylist() if "znode_mtime" in batch.schema.names
              else [None] * batch.num_rows)
    seg_off, seg_vals, seg_null = _lists(batch.column("segments"))
    seg_first = seg_vals.field("first_entry_id").to_pylist()
    ens_off, ens_vals, _ = _lists(seg_vals.field("ensemble"))
    members = ens_vals.to_pylist()
    ans_off, ans_vals, ans_null = _lists(batch.column("answers"))
    bookie = ans_vals.field("bookie").to_pylist()
    status = ans_vals.field("status").to_pylist()
    error = ans_vals.field("error").to_pylist()
    grp_off, grp_vals, _ = _lists(ans_vals.field("groups"))
    g_first = grp_vals.field("first_sequence_start").to_pylist()
    g_last = grp_vals.field("last_sequence_start").to_pylist()
    g_size = grp_vals.field("sequence_size").to_pylist()
    g_period = grp_vals.field("sequence_period").to_pylist()
    # Evidence columns (absent from ledger_state written before issue 8, e.g. the bench's): list answers.
    fields = {f.name for f in ans_vals.type}
    n_ans = len(bookie)
    evidence = ans_vals.field("evidence").to_pylist() if "evidence" in fields else [None] * n_ans
    share = ans_vals.field("probe_share").to_pylist() if "probe_share" in fields else [None] * n_ans
    probed = ans_vals.field("probed").to_pylist() if "probed" in fields else [None] * n_ans
    if "absent" in fields:
        abs_off, abs_vals, abs_null = _lists(ans_vals.field("absent"))
        absent_ids = abs_vals.to_pylist()
    for r in range(batch.num_rows):
        segments = () if seg_null[r] else tuple(
            Segment(seg_first[k], tuple(members[ens_off[k]:ens_off[k + 1]])) for k in range(seg_off[r], seg_off[r + 1]))
        answers: dict[str, BookieAnswer] = {}
        if not ans_null[r]:
            for k in range(ans_off[r], ans_off[r + 1]):
                st, ev = status[k], evidence[k] or ENTRIES_OF_LEDGER
                if st == OK and ev == READ_PROBE:
                    gone = () if abs_null[k] else absent_ids[abs_off[k]:abs_off[k + 1]]
                    a = BookieAnswer.read_probes(share[k] or 0, probed[k] or 0, gone)
                elif st == OK:
                    a = BookieAnswer(OK, tuple(SequenceGroup(g_first[j], g_last[j], g_size[j], g_period[j])
                                               for j in range(grp_off[k], grp_off[k + 1])), evidence=ev)
                elif st == NO_SUCH_LEDGER:
                    a = BookieAnswer.no_such_ledger(ev)
                else:
                    a = BookieAnswer.unavailable(error[k] or st, ev)
                b = bookie[k]
                answers[b] = better_answer(answers[b], a) if b in answers else a
        md = LedgerMetadata(
            ledger_id=cols["ledger_id"][r], format_version=cols["format_version"][r],
            ensemble_size=cols["ensemble_size"][r], write_quorum_size=cols["write_quorum"][r],
            ack_quorum_size=cols["ack_quorum"][r], state=cols["state"][r], last_entry_id=cols["last_entry_id"][r],
            length=cols["length"][r] or 0, segments=segments, digest_type=cols["digest_type"][r],
            has_password=bool(cols["has_password"][r]), ctime=cols["ctime"][r], ctoken=cols["ctoken"][r])
        yield cols["cluster"][r], md, answers, mtimes[r]
