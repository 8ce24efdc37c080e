import copy

import pytest

from audit.systems.bookkeeper.repair.plan import RepairInputError, plan_id, plan_repairs

SEG0 = ["b1:3181", "b2:3181", "b3:3181"]


def ledger(lid, ensemble=SEG0, wq=2, qa=2, topic="persistent://t/ns/orders", ctoken=7, segments=None):
    return {"cluster": "bk-a", "ledger_id": lid, "state": "CLOSED", "ensemble_size": len(ensemble),
            "write_quorum": wq, "ack_quorum": qa, "last_entry_id": 99, "ctoken": ctoken, "owner_topic": topic,
            "segments": segments or [{"first_entry_id": 0, "ensemble": list(ensemble)}]}


def frag(lid, bookie, index, ensemble=SEG0, first=0, last=99, ranges=((0, 99),), count=None):
    rs = [{"first": a, "last": b} for a, b in ranges]
    return {"cluster": "bk-a", "ledger_id": lid, "segment_first_entry_id": first, "segment_last_entry_id": last,
            "ensemble": list(ensemble), "bookie": bookie, "bookie_index": index,
            "missing_count": count if count is not None else sum(b - a + 1 for a, b in ranges), "missing_ranges": rs}


def bookies(**extra):
    base = {"b1:3181": ("available", "/r1"), "b2:3181": ("available", "/r2"), "b3:3181": ("registered", "/r3"),
            "b4:3181": ("available", "/r1"), "b5:3181": ("available", "/r4"), "b6:3181": ("readonly", "/r5")}
    base.update(extra)
    return {b: {"state": s, "rack": r} for b, (s, r) in base.items() if s is not None}


# (case, fragments, ledgers, bookies, expected (bookie, target, placement) per fragment of ledger 1)
CASES = [
    ("rack-diverse target for a dead bookie", [frag(1, "b3:3181", 2)], {1: ledger(1)}, bookies(),
     [("b3:3181", "b5:3181", "rack_diverse")]),
    ("falls back when only used racks remain", [frag(1, "b3:3181", 2)], {1: ledger(1)},
     bookies(**{"b5:3181": (None, None)}), [("b3:3181", "b4:3181", "fallback")]),
    ("readonly and ensemble bookies are never targets", [frag(1, "b3:3181", 2)], {1: ledger(1)},
     bookies(**{"b4:3181": ("readonly", "/r9"), "b5:3181": ("registered", "/r9")}), [("b3:3181", None, "none")]),
    ("no rack map: any writable bookie, placement unknown", [frag(1, "b3:3181", 2)], {1: ledger(1)},
     {b: {"state": v["state"], "rack": None} for b, v in bookies().items()}, [("b3:3181", "b4:3181", "unknown")]),
    ("two bookies of one segment get different targets", [frag(1, "b3:3181", 2), frag(1, "b2:3181", 1)],
     {1: ledger(1, wq=3)}, bookies(), [("b2:3181", "b5:3181", "rack_diverse"), ("b3:3181", "b4:3181", "fallback")]),
]


@pytest.mark.parametrize("case, fragments, ledgers, bks, expected", CASES, ids=[c[0] for c in CASES])
def test_targets(case, fragments, ledgers, bks, expected):
    plan = plan_repairs(fragments, ledgers, bks, [])
    (led,) = plan["ledgers"]
    assert [(f["bookie"], f["target"], f["placement"]) for f in led["fragments"]] == expected
    for f in led["fragments"]:
        assert f["target"] not in f["ensemble"]
        if f["placement"] in ("fallback", "none"):
            assert f["notes"], "a weak or missing target must say why"
    assert plan["dry_run"] is True and plan["cluster"] == "bk-a"


def test_write_set_neighbours_decide_the_racks_to_avoid():
    # E=4, Qw=2: index 0 shares write sets with 1 and 3 only; rack /r1 of index 2 is free to reuse
    ens = ["b1:3181", "b2:3181", "b7:3181", "b8:3181"]
    bks = bookies(**{"b7:3181": ("available", "/r1"), "b8:3181": ("available", "/r3"),
                     "b1:3181": ("registered", "/r2"), "b5:3181": (None, None)})
    plan = plan_repairs([frag(1, "b1:3181", 0, ensemble=ens)], {1: ledger(1, ensemble=ens)}, bks, [])
    f = plan["ledgers"][0]["fragments"][0]
    assert f["sources"] == ["b2:3181", "b8:3181"]
    assert (f["target"], f["target_rack"], f["placement"]) == ("b4:3181", "/r1", "rack_diverse")


def test_targets_are_spread_over_ledgers():
    plan = plan_repairs([frag(1, "b3:3181", 2), frag(2, "b3:3181", 2)], {1: ledger(1), 2: ledger(2)},
                        bookies(**{"b9:3181": ("available", "/r6")}), [])
    assert sorted(led["fragments"][0]["target"] for led in plan["ledgers"]) == ["b5:3181", "b9:3181"]


def test_commands_dead_bookies_and_preconditions():
    plan = plan_repairs([frag(1, "b3:3181", 2), frag(1, "b1:3181", 0)], {1: ledger(1)}, bookies(), [])
    led = plan["ledgers"][0]
    assert led["commands"] == ["bin/bookkeeper shell ledgermetadata -l 1",
                               "bin/bookkeeper shell recover -dr -l 1 b1:3181,b3:3181",
                               "bin/bookkeeper shell recover -l 1 b1:3181,b3:3181"]
    assert plan["dead_bookies"] == [{"bookie": "b3:3181", "commands": [
        "bin/bookkeeper shell recover -q b3:3181", "bin/bookkeeper shell recover -dr b3:3181",
        "bin/bookkeeper shell recover b3:3181"]}]
    assert plan["after"][0] == "bin/bookkeeper shell triggeraudit"
    (pre,) = plan["preconditions"]
    assert (pre["ledger_id"], pre["state"], pre["ctoken"], pre["last_entry_id"]) == (1, "CLOSED", 7, 99)
    assert pre["segments"] == [{"first_entry_id": 0, "ensemble": SEG0}]


def test_lost_entries_are_escalated_with_topic_and_range():
    lost = [{"ledger_id": 1, "ranges": [{"first": 10, "last": 12}, {"first": 40, "last": 40}]}]
    plan = plan_repairs([frag(1, "b3:3181", 2, ranges=((0, 20),))], {1: ledger(1)}, bookies(), lost)
    (esc,) = plan["escalations"]
    assert (esc["ledger_id"], esc["owner_topic"], esc["entry_count"]) == (1, "persistent://t/ns/orders", 4)
    assert esc["ranges"] == [{"first": 10, "last": 12}, {"first": 40, "last": 40}]
    assert esc["commands"] == ["bin/bookkeeper shell readledger -l 1 -fe 10 -le 12",
                               "bin/bookkeeper shell readledger -l 1 -fe 40 -le 40"]
    assert "persistent://t/ns/orders" in esc["reason"]
    note = plan["ledgers"][0]["fragments"][0]["notes"][0]
    assert note.startswith("3 of these entries have no replica left")


def test_plan_id_is_canonical_and_tracks_preconditions():
    frs = [frag(1, "b3:3181", 2), frag(2, "b3:3181", 2)]
    lds = {1: ledger(1), 2: ledger(2)}
    a = plan_repairs(frs, lds, bookies(), [])
    b = plan_repairs(list(reversed(frs)), dict(reversed(list(lds.items()))), bookies(), [])
    assert a == b and len(a["plan_id"]) == 64 and a["plan_id"] == plan_id(a)
    changed = copy.deepcopy(lds)
    changed[2]["ctoken"] = 8
    assert plan_repairs(frs, changed, bookies(), [])["plan_id"] != a["plan_id"]


def test_ledger_without_metadata_is_skipped():
    plan = plan_repairs([frag(5, "b3:3181", 2)], {}, bookies(), [])
    assert plan["ledgers"] == [] and plan["skipped"][0]["ledger_id"] == 5 and plan["preconditions"] == []


@pytest.mark.parametrize("fragments, lost, source, field", [
    ([frag(1, "b3:3181", 1)], [], "fragments[0]", "bookie_index"),
    ([frag(1, "b3:3181", 2, first=50)], [], "fragments[0]", "segment_first_entry_id"),
    ([frag(1, "b3:3181", 2), {**frag(1, "b1:3181", 0), "cluster": "bk-b"}], [], "fragments", "cluster"),
    ([{**frag(1, "b3:3181", 2), "ledger_id": "1"}], [], "fragments[0]", "ledger_id"),
    ([{**frag(1, "b3:3181", 2), "missing_ranges": [{"first": 5, "last": 4}]}], [], "fragments[0]", "missing_ranges"),
    ([], [{"ledger_id": 1, "entry_count": -1}], "lost[0]", "entry_count"),
    ([], [{"entry_count": 1}], "lost[0]", "ledger_id"),
])
def test_bad_input_names_source_and_field(fragments, lost, source, field):
    with pytest.raises(RepairInputError) as err:
        plan_repairs(fragments, {1: ledger(1)}, bookies(), lost)
    assert (err.value.source, err.value.field) == (source, field)
