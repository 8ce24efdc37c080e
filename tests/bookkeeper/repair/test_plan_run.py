"""plan_run: the BookKeeper planner over a staged run -- findings/bk_missing_fragments, tables/bk_ledgers and
tables/bk_bookies as Parquet, bk.entries_lost violations -- one plan per cluster, a malformed cluster an error."""
import json

import pyarrow as pa
import pyarrow.parquet as pq

from audit.contracts import RunOutputs
from audit.repair import common
from audit.systems.bookkeeper.repair.plan import RepairInputError, plan_id, plan_repairs, plan_run
from tests.bookkeeper.repair.test_repair_plan import bookies, frag, ledger


def _write(root, rel, rows):
    d = root / rel
    d.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), str(d / "part-00000.parquet"))


def _lost(lid, count, cluster="bk-a", ranges=None):
    ev = {"ledger_id": lid, **({"lost_ranges": ranges} if ranges else {})}
    return {"system": "bookkeeper", "cluster": cluster, "check": "bk.entries_lost", "severity": "critical",
            "subject": f"ledger {lid}", "entry_count": count, "message": "m", "evidence": json.dumps(ev)}


def _stage(root, fragments, ledgers):
    _write(root, "findings/bk_missing_fragments", fragments)
    _write(root, "tables/bk_ledgers", ledgers)
    _write(root, "tables/bk_bookies", [{"cluster": c, "bookie": b, "state": v["state"], "rack": v["rack"]}
                                       for c in ("bk-a", "bk-b") for b, v in bookies().items()])


def test_one_plan_per_cluster_equal_to_plan_repairs(tmp_path):
    _stage(tmp_path, [frag(1, "b3:3181", 2)], [ledger(1)])
    violations = [_lost(1, 5, ranges=[{"first": 0, "last": 4}]), _lost(1, 9, cluster="elsewhere")]
    plans, errors = plan_run(RunOutputs(root=tmp_path, violations=violations, estate=None))
    expected = plan_repairs([frag(1, "b3:3181", 2)], {1: ledger(1)}, bookies(),
                            [{"ledger_id": 1, "entry_count": 5, "ranges": [{"first": 0, "last": 4}]}])
    assert errors == [] and plans == [expected]
    assert plans[0]["escalations"][0]["entry_count"] == 5 and plans[0]["plan_id"] == plan_id(plans[0])


def test_a_malformed_cluster_is_an_error_and_the_others_are_planned(tmp_path):
    bad = {**frag(1, "b3:3181", 0), "cluster": "bk-b"}         # b3 is not at index 0 of the ensemble
    _stage(tmp_path, [frag(1, "b3:3181", 2), bad], [ledger(1), {**ledger(1), "cluster": "bk-b"}])
    plans, errors = plan_run(RunOutputs(root=tmp_path, violations=[], estate=None))
    assert [p["cluster"] for p in plans] == ["bk-a"]
    (err,) = errors
    assert (err["status"], err["system"], err["cluster"], err["source"], err["field"]) == (
        "error", "bookkeeper", "bk-b", "fragments[0]", "bookie_index")


def test_lost_entries_without_a_ledger_id_are_an_error(tmp_path):
    _stage(tmp_path, [frag(1, "b3:3181", 2)], [ledger(1)])
    broken = {**_lost(1, 5), "evidence": "{}"}
    plans, errors = plan_run(RunOutputs(root=tmp_path, violations=[_lost(1, 5), broken], estate=None))
    assert plans == [] and [(e["cluster"], e["source"]) for e in errors] == [("bk-a", "violations[1]")]


def test_nothing_to_plan(tmp_path):
    assert plan_run(RunOutputs(root=tmp_path, violations=[], estate=None)) == ([], [])


def test_shared_parts_live_in_common():
    assert RepairInputError is common.RepairInputError and plan_id is common.plan_id
