"""Ledger metadata invariants as (code, message) pairs (LedgerMetadataImpl constructor,
docs/formats/bookkeeper.md §1.1).

Decoders keep what is stored, so a znode that BookKeeper itself would refuse to load still reaches
here and is reported instead of being silently repaired."""
from __future__ import annotations

from audit.systems.bookkeeper.domain.model import CLOSED, IN_RECOVERY, INVALID_ENTRY_ID, OPEN, LedgerMetadata

STATES = (OPEN, IN_RECOVERY, CLOSED)
Violation = tuple[str, str]


def metadata_violations(md: LedgerMetadata) -> list[Violation]:
    return _state_violations(md) + _quorum_and_digest_violations(md) + _ensemble_violations(md)


def _state_violations(md: LedgerMetadata) -> list[Violation]:
    """The ledger state and what it implies for lastEntryId and length."""
    out: list[Violation] = []
    if md.state not in STATES:
        out.append(("unknown_state", f"state {md.state!r} is not one of {', '.join(STATES)}"))
    if md.state == CLOSED and md.last_entry_id < INVALID_ENTRY_ID:
        out.append(("closed_without_last_entry",
                    f"CLOSED but lastEntryId is {md.last_entry_id}; expected >= {INVALID_ENTRY_ID}"))
    if md.state in (OPEN, IN_RECOVERY) and (md.last_entry_id != INVALID_ENTRY_ID or md.length != 0):
        out.append(("not_closed_with_last_entry",
                    f"{md.state} but lastEntryId={md.last_entry_id}, length={md.length}; "
                    f"expected lastEntryId={INVALID_ENTRY_ID}, length=0 until the ledger is closed"))
    return out


def _quorum_and_digest_violations(md: LedgerMetadata) -> list[Violation]:
    """Ensemble size, write quorum and ack quorum in order; a digest type exactly when a password is stored."""
    out: list[Violation] = []
    E, Qw, Qa = md.ensemble_size, md.write_quorum_size, md.ack_quorum_size
    if min(E, Qw, Qa) < 1 or not (Qa <= Qw <= E):
        out.append(("quorum_order", f"expected 1 <= ackQuorum <= writeQuorum <= ensembleSize, "
                                    f"got Qa={Qa}, Qw={Qw}, E={E}"))
    if (md.digest_type is None) == md.has_password and md.format_version >= 2:
        out.append(("digest_password_mismatch",
                    f"digestType={md.digest_type} but password {'present' if md.has_password else 'absent'}; "
                    "expected both present or both absent"))
    return out


def _ensemble_violations(md: LedgerMetadata) -> list[Violation]:
    """The ensembles: at least one, the first at entry 0, keys strictly increasing, each of ensembleSize distinct
    bookies."""
    if not md.segments:
        return [("no_segments", "metadata has no ensembles; expected at least one")]
    out: list[Violation] = []
    if md.segments[0].first_entry_id != 0:
        out.append(("first_segment_not_zero",
                    f"first ensemble starts at entry {md.segments[0].first_entry_id}; expected 0"))
    for prev, seg in zip(md.segments, md.segments[1:]):
        if seg.first_entry_id <= prev.first_entry_id:
            out.append(("segment_keys_not_increasing",
                        f"ensemble at entry {seg.first_entry_id} follows one at {prev.first_entry_id}; "
                        "expected strictly increasing first entry ids"))
    for seg in md.segments:
        if len(seg.ensemble) != md.ensemble_size:
            out.append(("ensemble_size_mismatch",
                        f"ensemble at entry {seg.first_entry_id} has {len(seg.ensemble)} bookies; "
                        f"expected ensembleSize {md.ensemble_size}"))
        dups = sorted({b for b in seg.ensemble if seg.ensemble.count(b) > 1})
        if dups:
            out.append(("duplicate_bookie_in_ensemble",
                        f"ensemble at entry {seg.first_entry_id} lists {', '.join(dups)} more than once"))
    return out
