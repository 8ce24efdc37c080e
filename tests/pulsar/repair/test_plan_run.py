"""plan_run: the Pulsar planner over a staged run's metrics/pulsar_failover, reset calls pointed at the admin
URLs of the estate's Pulsar clusters; bad rows are error items."""
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq

from audit.contracts import RunOutputs
from audit.systems.pulsar.repair.plan import admin_urls, plan_run, plan_subscription_repairs
from tests.pulsar.repair.test_repair_plan import ADMIN, row


def _estate(urls):
    clusters = tuple(SimpleNamespace(name=n, admin_url=u) for n, u in urls.items())
    return SimpleNamespace(clusters=lambda system: clusters if system == "pulsar" else ())


def _stage(root, rows):
    d = root / "metrics" / "pulsar_failover"
    d.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), str(d / "part-00000.parquet"))


def test_plans_and_errors_from_the_staged_metrics(tmp_path):
    rows = [row(sub="ok"), row(sub="in-step", target_mdp="7:4", redelivered=0), {**row(sub="broken"), "lost": -1}]
    _stage(tmp_path, rows)
    plans, errors = plan_run(RunOutputs(root=tmp_path, violations=[], estate=_estate({**ADMIN, "east": None})))
    assert plans == [p for p in plan_subscription_repairs(rows, cluster_admin_urls=ADMIN) if p["status"] == "planned"]
    assert [p["subscription"] for p in plans] == ["ok"] and plans[0]["admin_url"] == ADMIN["west"]
    assert [(e["status"], e["system"], e["subscription"], e["field"]) for e in errors] == [
        ("error", "pulsar", "broken", "lost")]


def test_without_estate_or_metrics(tmp_path):
    assert plan_run(RunOutputs(root=tmp_path, violations=[], estate=None)) == ([], [])
    _stage(tmp_path, [row()])
    (plan,), errors = plan_run(RunOutputs(root=tmp_path, violations=[], estate=None))
    assert plan["admin_url"] is None and errors == []
    assert admin_urls(_estate({"west": "https://w", "east": None})) == {"west": "https://w"}
