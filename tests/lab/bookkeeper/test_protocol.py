"""The simulated write protocol on a tiny cluster: striping, acks and LAC, ensemble changes keyed at LAC + 1
(append vs replace), rack-aware choices; and the lab's configuration errors."""
from __future__ import annotations

import random

import pytest

from audit.systems.bookkeeper.domain.model import CLOSED
from audit.systems.bookkeeper.formats import availability, protocol
from lab.bookkeeper import LabConfigError, LabError, build_lab
from lab.bookkeeper.cluster import znode_path
from lab.bookkeeper.sim import Cluster, LedgerWriter

B = [f"b{i}" for i in range(1, 10)]
RACKS = {b: f"/r{i % 3}" for i, b in enumerate(B)}   # b1 r0, b2 r1, b3 r2, b4 r0 ...


def writer(ensemble, qw, qa, cluster=None):
    cluster = cluster or Cluster(B, RACKS)
    return cluster, LedgerWriter(cluster, 7, list(ensemble), qw, qa, random.Random(1))


def test_entries_are_striped_by_absolute_entry_id():
    cluster, w = writer(["b1", "b2", "b3"], 2, 2)
    for e in range(6):
        w.add(e, e)
    assert cluster.entries("b1", 7) == {0, 2, 3, 5}
    assert cluster.entries("b2", 7) == {0, 1, 3, 4}
    assert cluster.entries("b3", 7) == {1, 2, 4, 5}
    assert w.lac == 5 and w.segments == [(0, ["b1", "b2", "b3"])]
    w.close()
    assert w.state == CLOSED


def test_lac_advances_only_over_the_contiguous_acked_prefix():
    cluster, w = writer(["b1", "b2"], 2, 2)
    w.add(0, 0)
    w.send(1, 1, only_indexes={1})   # entry 1 reached one of two bookies: not acked (Qa 2)
    w.add(2, 2)                       # entry 2 fully acked, but 1 is not
    assert w.lac == 0
    w.send(1, 3, only_indexes={0})
    w.deliver_acks()
    assert w.lac == 2


def test_a_crash_appends_a_segment_at_lac_plus_one_and_resends_the_pending_add():
    cluster, w = writer(["b1", "b2"], 2, 2)
    cluster.crash("b2", at=10)
    for e in range(20):
        w.add(e, e)
    (first, ens0), (key, ens1) = w.segments
    assert (first, ens0) == (0, ["b1", "b2"]) and key == 10
    assert ens1[0] == "b1" and ens1[1] not in ("b1", "b2") and RACKS[ens1[1]] == RACKS["b2"]   # same rack
    assert cluster.entries("b2", 7) == set(range(10))
    assert cluster.entries(ens1[1], 7) == set(range(10, 20))
    assert w.lac == 19


def test_an_ensemble_change_with_an_unchanged_lac_replaces_the_last_segment():
    cluster, w = writer(["b1", "b2"], 2, 1)
    for e in range(5):
        w.add(e, e)
    w.unwritable.add("b2")
    w.add(5, 5, deliver=False)            # change at LAC + 1 = 5: append
    assert [k for k, _ in w.segments] == [0, 5]
    w.add(6, 6, deliver=False)
    w.unwritable.update(w.ensemble)
    failed = w.send(7, 7)
    w.change_ensemble(failed, 7)          # LAC still 4: key 5 again -> replace
    assert [k for k, _ in w.segments] == [0, 5] and w.replaced_segments == 1
    w.deliver_acks()
    assert w.lac == 6                     # 5 and 6 acked by the replaced bookies
    new = w.segments[1][1]
    assert all(5 not in (cluster.entries(b, 7) or ()) for b in new)


def test_rack_aware_choice_and_one_rack_fallback():
    cluster = Cluster(B, RACKS)
    rng = random.Random(3)
    for size, qw in ((3, 3), (3, 2), (6, 3), (4, 2)):
        ens = cluster.choose_ensemble(rng, size, qw, 0, include=["b5"])
        assert "b5" in ens and len(set(ens)) == size
        for i in range(size):
            assert len({RACKS[ens[(i + w) % size]] for w in range(qw)}) >= min(qw, 3)
    one = cluster.choose_one_rack(rng, 3, 0)
    assert len({RACKS[b] for b in one}) == 1
    cluster.crash("b1", 0)
    with pytest.raises(LabError, match="not writable"):
        cluster.choose_ensemble(rng, 3, 2, 5, include=["b1"])
    assert not Cluster(B, {b: f"/r{i % 2}" for i, b in enumerate(B)}).feasible(3, 2)


def test_lab_views_for_a_bookie_protocol_server():
    lab = build_lab({"seed": 5, "ledgers": 25, "entries_per_ledger": 60}, 1_760_000_000_000)
    lid = lab.ledger_ids[-1]
    bookie = next(b for b in lab.ensemble_bookies(lid) if lab.reachable(b))
    held = lab.entries_on(bookie, lid)
    answer = protocol.decode_response(lab.entries_of_ledger_answer(bookie, lid, 42), "t")
    assert (answer.status, answer.ledger_id, answer.txn_id) == ("EOK", lid, 42)
    assert list(availability.iter_entries(availability.decode(answer.availability, "t"))) == held
    stranger = next(b for b in lab.bookies if b not in lab.ensemble_bookies(lid))
    assert lab.entries_on(stranger, lid) is None
    assert protocol.decode_response(lab.entries_of_ledger_answer(stranger, lid, 1), "t").status == "ENOLEDGER"
    with pytest.raises(KeyError):
        lab.reachable("nobody:3181")


def test_znode_paths():
    assert znode_path(1) == "00/0000/L0001"
    assert znode_path(1234567890) == "12/3456/L7890"
    assert znode_path(2**31) == "000/0000/0021/4748/L3648"


@pytest.mark.parametrize("cfg, field", [
    ({"ledgers": "many"}, "lab.ledgers"),
    ({"bookies": 3}, "lab.bookies"),
    ({"seeds": 1}, "lab.seeds"),
    ({"faults": {"kind": "disk_loss"}}, "lab.faults"),
    ({"faults": [{"kind": "meteor"}]}, "lab.faults[0].kind"),
    ({"faults": [{"kind": "disk_loss", "ledger": 2}]}, "lab.faults[0].ledger"),
    ({"faults": [{"kind": "disk_loss", "bookie": "bookie-99.lab:3181"}]}, "lab.faults[0].bookie"),
    ({"faults": [{"kind": "ensemble_change", "ago_min": 5, "down_min": 9}]}, "lab.faults[0].down_min"),
    ({"faults": [{"kind": "bookie_crash", "bookie": "bookie-01.lab:3181"},
                 {"kind": "disk_loss", "bookie": "bookie-01.lab:3181"}]}, "lab.faults[].bookie"),
    ({"ledgers": 5}, "lab.ledgers"),
])
def test_bad_config_names_the_field(cfg, field):
    with pytest.raises(LabConfigError) as err:
        build_lab(cfg, 1_760_000_000_000)
    assert err.value.field == field and err.value.source == "lab config" and err.value.expected
