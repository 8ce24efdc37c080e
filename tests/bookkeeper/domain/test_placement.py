import pytest

from audit.systems.bookkeeper.domain.model import OPEN
from audit.systems.bookkeeper.domain.placement import placement_violations
from tests.bookkeeper.domain.cases import ledger

RACKS = {"a": "/r1", "b": "/r1", "c": "/r2", "d": "/r2", "e": "/r3"}


def _found(md, racks=RACKS, **kw):
    return [(v.segment_first_entry_id, v.write_set_index, v.bookies, v.racks)
            for v in placement_violations(md, racks, **kw)]


CASES = [
    ("spread", ledger({0: ["a", "c", "e"]}, 9, Qw=2), RACKS, {}, []),
    ("two_same_rack_neighbours", ledger({0: ["a", "b", "c"]}, 9, Qw=2), RACKS, {},
     [(0, 0, ("a", "b"), ("/r1", "/r1"))]),
    ("wrap_around_write_set", ledger({0: ["a", "c", "b"]}, 9, Qw=2), RACKS, {},
     [(0, 2, ("b", "a"), ("/r1", "/r1"))]),
    ("second_segment_only", ledger({0: ["a", "c"], 5: ["c", "d"]}, 9, Qw=2), RACKS, {},
     [(5, 0, ("c", "d"), ("/r2", "/r2")), (5, 1, ("d", "c"), ("/r2", "/r2"))]),
    ("unknown_rack_not_judged", ledger({0: ["a", "x"]}, 9, Qw=2), RACKS, {}, []),
    ("qw1_cannot_span_two_racks", ledger({0: ["a", "b"]}, 9, Qw=1), RACKS, {}, []),
    ("three_racks_required", ledger({0: ["a", "c", "d", "e"]}, 9, Qw=3), RACKS, {"min_racks_per_write_quorum": 3},
     [(0, 0, ("a", "c", "d"), ("/r1", "/r2", "/r2")), (0, 1, ("c", "d", "e"), ("/r2", "/r2", "/r3"))]),
    ("empty_segment_skipped", ledger({0: ["a", "c"], 10: ["a", "b"]}, 9, Qw=2), RACKS, {}, []),
    ("short_segment_uses_few_write_sets", ledger({0: ["a", "c", "b"], 1: ["a", "c", "e"]}, 9, Qw=2), RACKS, {}, []),
    ("open_ledger_all_write_sets", ledger({0: ["a", "c", "b"]}, -1, Qw=2, state=OPEN), RACKS, {},
     [(0, 2, ("b", "a"), ("/r1", "/r1"))]),
]


@pytest.mark.parametrize("name, md, racks, kw, expected", CASES, ids=[c[0] for c in CASES])
def test_placement_violations(name, md, racks, kw, expected):
    assert _found(md, racks, **kw) == expected
