"""The real Kafka 3.6.2 broker log dir (tests/fixtures/real/kafka-broker-logdir-01/) imported by hand into an
estate whose cluster has no admin endpoint (`source: log-dirs`), then audited from the imported evidence alone
through the CLI: it decodes cleanly (no quarantine row) and gives no finding. Declared as the single-broker
cluster it is (`brokers: [0]`) the run is complete: every partition judged, nothing left unjudged. Without the
declaration the replication factor is unknown: one "not judged" item for the cluster, never a finding."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from audit.cli.main import EXIT_CLEAN, EXIT_INCOMPLETE, main

LOGDIR = Path(__file__).resolve().parents[2] / "fixtures" / "real" / "kafka-broker-logdir-01"


def _rows(path: Path) -> list[dict]:
    return ds.dataset(str(path), format="parquet").to_table().to_pylist() if path.exists() else []


@pytest.mark.parametrize("declared", [True, False])
def test_real_broker_log_dir_audits_clean(tmp_path, capsys, declared):
    estate = tmp_path / "estate.yaml"
    estate.write_text(f"""
estate: realkafka
store: {{uri: "file://{tmp_path / 'store'}"}}
spark: {{master: "local[2]"}}
systems:
  kafka:
    - name: archive
      source: log-dirs
""" + ("      brokers: [0]\n" if declared else ""))
    assert main(["import", "--estate", str(estate), "--run-id", "imp", "--system", "kafka", "--cluster", "archive",
                 "--kind", "log-dir", "--broker", "0", str(LOGDIR)]) == EXIT_CLEAN
    imported = json.loads(capsys.readouterr().out)
    assert imported["rejected"] == [] and imported["stored"] > 100
    code = main(["run", "--estate", str(estate), "--run-id", "r", "--from-raw", "imp", "--json"])
    summary = json.loads(capsys.readouterr().out)
    gaps = [g for g in summary.get("coverage_gaps", []) if g.get("system") == "kafka"]
    if declared:
        assert gaps == [] and summary["complete"] is True and code == EXIT_CLEAN, summary
    else:
        # one item for the cluster (not one per partition): what would let the cross-replica rules run
        (gap,) = gaps
        assert gap["cluster"] == "archive" and "declare the cluster's brokers:" in gap["what"], gap
        assert code == EXIT_INCOMPLETE and summary["complete"] is False
    assert summary["counts"]["total"] == 0 and summary["counts"]["by_check"] == {}
    assert summary["kafka"]["clusters"]["archive"]["partitions"] == 51
    assert summary["kafka"]["clusters"]["archive"]["findings"] == 0
    attempt = next((tmp_path / "store" / "realkafka" / "runs" / "r" / "attempts").iterdir())
    quarantine = attempt / "tables" / "quarantine" / "system=kafka"
    assert quarantine.is_dir() and _rows(quarantine) == []          # decoded cleanly
    replicas = _rows(attempt / "tables" / "kafka_replicas")
    assert len(replicas) == 51 and all(r["index_complete"] and r["epoch_checkpoint"] for r in replicas)
    (one,) = [r for r in replicas if r["topic"] == "one"]
    assert (one["high_watermark"], one["log_end_offset"], one["batches"]) == (11, 11, 11)
    assert len(_rows(attempt / "tables" / "kafka_batches")) == 12
    violations = attempt / "findings" / "violations" / "system=kafka"
    assert violations.is_dir() and _rows(violations) == []
    assert len(_rows(attempt / "metrics" / "kafka_partitions")) == 51
    assert len(_rows(attempt / "metrics" / "kafka_coverage")) == (0 if declared else 1)
    suites = {s["name"]: s["status"] for s in summary["validation"]["suites"]}
    assert suites["kafka_violations"] == "passed" and suites["violations"] == "passed", suites
