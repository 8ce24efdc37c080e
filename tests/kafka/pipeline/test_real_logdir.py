"""The real Kafka 3.6.2 broker log dir (tests/fixtures/real/kafka-broker-logdir-01/) imported by hand into an
estate whose cluster has no admin endpoint (`source: log-dirs`), then audited from the imported evidence alone
through the CLI: it decodes cleanly (no quarantine row) and gives no finding. Declared as the single-broker
cluster it is (`brokers: [0]`) every partition is judged, nothing left unjudged. Without the declaration the
replication factor is unknown: one "not judged" item for the cluster, never a finding."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as ds

from audit.cli.main import EXIT_CLEAN, EXIT_INCOMPLETE, main

LOGDIR = Path(__file__).resolve().parents[2] / "fixtures" / "real" / "kafka-broker-logdir-01"


def _rows(path: Path) -> list[dict]:
    return ds.dataset(str(path), format="parquet").to_table().to_pylist() if path.exists() else []


def test_real_broker_log_dir_audits_clean(tmp_path, capsys):
    """The same log dir imported twice: as `archive`, declared single-broker, and as `undeclared` (one run)."""
    estate = tmp_path / "estate.yaml"
    estate.write_text(f"""
estate: realkafka
store: {{uri: "file://{tmp_path / 'store'}"}}
spark: {{master: "local[2]"}}
systems:
  kafka:
    - {{name: archive, source: log-dirs, brokers: [0]}}
    - {{name: undeclared, source: log-dirs}}
""")
    for cluster in ("archive", "undeclared"):
        assert main(["import", "--estate", str(estate), "--run-id", "imp", "--system", "kafka", "--cluster",
                     cluster, "--kind", "log-dir", "--broker", "0", str(LOGDIR)]) == EXIT_CLEAN
        imported = json.loads(capsys.readouterr().out)
        assert imported["rejected"] == [] and imported["stored"] > 100
    code = main(["run", "--estate", str(estate), "--run-id", "r", "--from-raw", "imp", "--json"])
    summary = json.loads(capsys.readouterr().out)
    gaps = [g for g in summary.get("coverage_gaps", []) if g.get("system") == "kafka"]
    # declared, every partition is judged; undeclared, one item for the cluster (not one per partition): what
    # would let the cross-replica rules run
    (gap,) = gaps
    assert gap["cluster"] == "undeclared" and "declare the cluster's brokers:" in gap["what"], gap
    assert code == EXIT_INCOMPLETE and summary["complete"] is False
    assert summary["counts"]["total"] == 0 and summary["counts"]["by_check"] == {}
    attempt = next((tmp_path / "store" / "realkafka" / "runs" / "r" / "attempts").iterdir())
    quarantine = attempt / "tables" / "quarantine" / "system=kafka"
    assert quarantine.is_dir() and _rows(quarantine) == []          # decoded cleanly
    violations = attempt / "findings" / "violations" / "system=kafka"
    assert violations.is_dir() and _rows(violations) == []
    suites = {s["name"]: s["status"] for s in summary["validation"]["suites"]}
    assert suites["kafka_violations"] == "passed" and suites["violations"] == "passed", suites
    coverage = _rows(attempt / "metrics" / "kafka_coverage")
    for cluster in ("archive", "undeclared"):
        assert summary["kafka"]["clusters"][cluster]["partitions"] == 51
        assert summary["kafka"]["clusters"][cluster]["findings"] == 0
        replicas = [r for r in _rows(attempt / "tables" / "kafka_replicas") if r["cluster"] == cluster]
        assert len(replicas) == 51 and all(r["index_complete"] and r["epoch_checkpoint"] for r in replicas)
        (one,) = [r for r in replicas if r["topic"] == "one"]
        assert (one["high_watermark"], one["log_end_offset"], one["batches"]) == (11, 11, 11)
        assert len([r for r in _rows(attempt / "tables" / "kafka_batches") if r["cluster"] == cluster]) == 12
        assert len([r for r in _rows(attempt / "metrics" / "kafka_partitions") if r["cluster"] == cluster]) == 51
        assert len([c for c in coverage if c["cluster"] == cluster]) == (0 if cluster == "archive" else 1)
