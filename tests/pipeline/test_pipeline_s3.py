"""The whole pipeline against an S3 store (moto's server over HTTP on loopback): every stage reads what earlier
stages wrote through staging, so the published run is the same as with a local folder."""
from __future__ import annotations

from audit import pipeline
from audit.store.run import list_runs
from tests.estates import write_lab_estate
from tests.s3fixture import open_s3_store

CREDENTIALS = "{access_key: {env: AWS_ACCESS_KEY_ID}, secret_key: {env: AWS_SECRET_ACCESS_KEY}}"


def test_pipeline_on_s3_matches_the_lab_ground_truth(s3_endpoint, s3_bucket, tmp_path, spark):
    store = f'{{uri: "s3://{s3_bucket}/audits", endpoint_url: "{s3_endpoint}", credentials: {CREDENTIALS}}}'
    estate = write_lab_estate(tmp_path / "estate.yaml", estate="s3test", store=store, cluster="bk-s3",
                              lab="{seed: 5, ledgers: 24}")
    summary = pipeline.run_all(str(estate), run_id="s3-run")
    assert summary["status"] == "violations"
    lab = summary["lab"]
    assert lab["injected"] > 0 and (lab["missed"], lab["false_alarms"], lab["wrong_count"]) == (0, 0, 0)
    assert summary["coverage_gaps"], "the collectors' gaps must reach the report from the S3 store"

    (run,) = list_runs(open_s3_store(s3_endpoint, f"s3://{s3_bucket}/audits"), "s3test")
    keys = {o["key"].split(f"/attempts/{run.attempt_id}/", 1)[1] for o in run.manifest["objects"]}
    assert {"reports/summary.json", "reports/report.html", "reports/repair_plan.json",
            "reports/validation.json", "raw/bookkeeper/bk-s3/collection.json"} <= keys
    assert any(k.startswith("tables/bk_ledgers/") for k in keys)
    assert run.manifest["summary"]["run_id"] == "s3-run"
