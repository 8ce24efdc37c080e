import dataclasses

import pytest

from audit.systems.bookkeeper.domain.invariants import metadata_violations
from audit.systems.bookkeeper.domain.model import IN_RECOVERY, OPEN, Segment
from tests.bookkeeper.domain.cases import ledger

GOOD = ledger({0: ["a", "b", "c"], 10: ["a", "d", "c"]}, 20, Qw=2, Qa=2)


def _with(**kw):
    return dataclasses.replace(GOOD, **kw)


CASES = [
    ("valid", GOOD, []),
    ("valid_open", _with(state=OPEN, last_entry_id=-1, length=0), []),
    ("closed_empty_is_valid", _with(last_entry_id=-1, length=0), []),
    ("closed_without_last_entry", _with(last_entry_id=-102), ["closed_without_last_entry"]),
    ("open_with_last_entry", _with(state=OPEN), ["not_closed_with_last_entry"]),
    ("recovery_with_length", _with(state=IN_RECOVERY, last_entry_id=-1), ["not_closed_with_last_entry"]),
    ("unknown_state", _with(state="DELETED"), ["unknown_state"]),
    ("qa_above_qw", _with(ack_quorum_size=3), ["quorum_order"]),
    ("qw_above_e", _with(write_quorum_size=4, ack_quorum_size=1), ["quorum_order"]),
    ("zero_quorum", _with(ack_quorum_size=0), ["quorum_order"]),
    ("digest_without_password", _with(has_password=False), ["digest_password_mismatch"]),
    ("v1_has_neither", _with(format_version=1, digest_type=None, has_password=False), []),
    ("no_segments", _with(segments=()), ["no_segments"]),
    ("first_segment_not_zero", _with(segments=(Segment(3, ("a", "b", "c")),)), ["first_segment_not_zero"]),
    ("keys_equal", _with(segments=(Segment(0, ("a", "b", "c")), Segment(0, ("a", "b", "d")))),
     ["segment_keys_not_increasing"]),
    ("keys_decrease", _with(segments=(Segment(0, ("a", "b", "c")), Segment(9, ("a", "b", "d")),
                                      Segment(4, ("a", "b", "e")))), ["segment_keys_not_increasing"]),
    ("ensemble_size_mismatch", _with(segments=(Segment(0, ("a", "b")),)), ["ensemble_size_mismatch"]),
    ("duplicate_bookie", _with(segments=(Segment(0, ("a", "b", "a")),)), ["duplicate_bookie_in_ensemble"]),
]


@pytest.mark.parametrize("name, md, codes", CASES, ids=[c[0] for c in CASES])
def test_metadata_violations(name, md, codes):
    found = metadata_violations(md)
    assert [code for code, _ in found] == codes
    assert all(msg for _, msg in found)


def test_message_names_the_values():
    ((code, msg),) = metadata_violations(_with(ack_quorum_size=3))
    assert "Qa=3" in msg and "Qw=2" in msg and "E=3" in msg
