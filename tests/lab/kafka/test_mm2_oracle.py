"""The failover oracle of the lab's ground truth (lab/kafka/mm2_oracle.py) on small histories built by hand, every
expected count worked out below record by record; and that neither it nor the modules feeding the truth import a
translation rule (the simulator's lab/kafka/mm2_rules.py, the audit's domain/mm2.py and failover.py)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lab.kafka.mm2_oracle import Outcome, PartitionHistory, failover

LAB = Path(__file__).resolve().parents[3] / "lab" / "kafka"

# A restart. The first task lifetime copies upstream 0..11 to target offsets 0..11 (u = d), its source offsets
# committed up to 7; it is killed, the next one resumes at 8 and copies upstream 8..19 to target 12..23 (u = d - 4):
# upstream 8..11 are copied twice. Retention moved the target's log start to 2. The syncs: (u, d) = (0, 0), (5, 5),
# (10, 10) from the first lifetime, then (8, 12) (the restarted task's first record: upstream goes back) and
# (15, 19).
#   target offset  2  3  4  5  6  7  8  9 10 11 | 12 13 14 15 16 17 18 19 20 21 22 23
#   upstream       2  3  4  5  6  7  8  9 10 11 |  8  9 10 11 12 13 14 15 16 17 18 19
RESTART = PartitionHistory(
    copies=tuple((d, d) for d in range(2, 12)) + tuple((d, d - 4) for d in range(12, 24)),
    syncs=((0, 0), (5, 5), (10, 10), (8, 12), (15, 19)),
    log_start=2)


@pytest.mark.parametrize("consumed, committed, expected, why", [
    # reads 14..23 (upstream 10..19): 10..15 consumed -> 6 redelivered; 16..19 read at 20..23 -> nothing skipped.
    # Proof sync (15, 19), 15 consumed: the syncs show the group past 14..19, all six redelivered records.
    (16, 14, Outcome(resume_at=20, sync_position=20, redelivered=6, skipped=0, redelivered_behind_syncs=6),
     "behind the restarted lifetime's sync"),
    # reads 3..23: 3..8 (upstream 3..8) and 12 (upstream 8 again) -> 7 redelivered; 9..11 at 9..11 and again at
    # 13..15. Proof sync (8, 12): the span 3..12 holds the first lifetime's copies of 9..11, not consumed: not
    # counted, the 7 redelivered are.
    (9, 3, Outcome(resume_at=9, sync_position=13, redelivered=7, skipped=0, redelivered_behind_syncs=7),
     "the first lifetime's copies of unconsumed offsets inside the span are not counted"),
    # D = 0 is below the log start: the consumer starts at 2 and reads 2..6 (upstream 2..6) again -> 5; no sync at
    # or below 7 after the rewind ((5, 5) comes before it): nothing proven
    (7, 0, Outcome(resume_at=7, sync_position=None, redelivered=5, skipped=0, redelivered_behind_syncs=0),
     "a sync before the rewind proves nothing"),
    # the target group is ahead: it reads 22..23 (upstream 18, 19); 12..17, copied at 16..21, never read -> 6
    (12, 22, Outcome(resume_at=16, sync_position=13, redelivered=0, skipped=6, redelivered_behind_syncs=0),
     "skipped"),
    # starts at 10: upstream 9 was copied at 9 (before the start) and again at 13 (read): not skipped; the second
    # copy of 8 at 12 is read again -> 1 redelivered, before the proof sync's position 13
    (9, 10, Outcome(resume_at=9, sync_position=13, redelivered=1, skipped=0, redelivered_behind_syncs=1),
     "a second copy read after the start is not a skip"),
    # the proof sync (15, 19) names U itself: the group resumes at 19; 14..18 (upstream 10..14) are redelivered
    (15, 14, Outcome(resume_at=19, sync_position=19, redelivered=5, skipped=0, redelivered_behind_syncs=5),
     "the sync names the first unconsumed record"),
    # no target committed offset: nothing counted
    (9, None, Outcome(resume_at=9, sync_position=13, redelivered=0, skipped=0, redelivered_behind_syncs=0),
     "no target offset"),
])
def test_restart_history(consumed, committed, expected, why):
    assert failover(RESTART, consumed, committed) == expected, why


def test_translation_past_a_transaction_marker_skips_one_record():
    """Upstream 0..5 are data, 6 a COMMIT marker (never copied), 7..8 data: target 0..5 copy 0..5, 6 copies 7, 7
    copies 8. The group consumed through the marker (U = 7); the pre-3.4.1 rule put the target group at
    5 + (7 - 5) = 7. A consumer there reads only the copy of 8: upstream 7, copied at 6, is never read."""
    history = PartitionHistory(copies=((0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 7), (7, 8)),
                               syncs=((0, 0), (5, 5)), log_start=0)
    assert failover(history, 7, 7) == Outcome(resume_at=6, sync_position=6, redelivered=0, skipped=1,
                                              redelivered_behind_syncs=0)
    # at the 3.4.1+ position (the record after the sync's) nothing is skipped or redelivered
    assert failover(history, 7, 6) == Outcome(6, 6, 0, 0, 0)


def test_a_sync_naming_a_record_the_target_no_longer_holds_proves_nothing():
    """Sync (3, 3), but target offset 3 now copies upstream 5 (the remote partition was truncated and written
    again): the proof falls back to (0, 0). U = 4, D = 0: 0..2 (upstream 0..2) are redelivered, only 0 proven."""
    history = PartitionHistory(copies=((0, 0), (1, 1), (2, 2), (3, 5), (4, 6)), syncs=((0, 0), (3, 3)), log_start=0)
    assert failover(history, 4, 0) == Outcome(resume_at=3, sync_position=1, redelivered=3, skipped=0,
                                              redelivered_behind_syncs=1)


def _imports(path: Path) -> dict[str, set[str]]:
    """module imported -> the names imported from it ("*" for `import module`)."""
    out: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.setdefault(node.module, set()).update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                out.setdefault(a.name, set()).add("*")
    return out


def test_the_truth_uses_no_translation_rule():
    oracle = _imports(LAB / "mm2_oracle.py")
    assert set(oracle) == {"__future__", "dataclasses"}
    # the modules building the MirrorMaker 2 part of the truth read the simulated topics and logs, nothing more
    for name in ("mm2_read.py", "ground_truth.py", "truth.py", "mm2_oracle.py"):
        imported = _imports(LAB / name)
        assert "lab.kafka.mm2_rules" not in imported, name
        assert not [m for m in imported if m.startswith("audit.systems.kafka.domain.") and
                    m.rsplit(".", 1)[1] in ("mm2", "failover")], name
    assert _imports(LAB / "mm2_read.py")["lab.kafka.mm2"] <= {"Emitted", "MirrorFlow", "sync_records",
                                                              "checkpoint_records"}
    # and no lab module imports the audit's translation
    for path in LAB.glob("*.py"):
        for module, names in _imports(path).items():
            assert module not in ("audit.systems.kafka.domain.mm2", "audit.systems.kafka.domain.failover"), path
            assert not (module == "audit.systems.kafka.domain" and names & {"mm2", "failover"}), path
