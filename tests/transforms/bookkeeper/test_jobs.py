"""spark_jobs/run.py for BookKeeper in-process (same session) and once through spark-submit."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from audit.formats.bookkeeper.availability import encode_entries
from audit.formats.bookkeeper.ledger_metadata import encode_znode
from audit.formats.bookkeeper.protocol import encode_response
from spark_jobs import run
from tests.domain.bookkeeper.cases import expected_entries, ledger

REPO = Path(__file__).resolve().parents[3]


def _raw(root: Path) -> Path:
    c = root / "raw" / "bookkeeper" / "bk-a"
    md = ledger({0: ["bk1:3181", "bk2:3181", "bk3:3181"]}, 99, Qw=2, Qa=2, ledger_id=3)
    files = {"ledger-metadata/00/0000/L0003": encode_znode(md),
             "bookies/available.json": json.dumps({"available": ["bk1:3181", "bk2:3181", "bk3:3181"],
                                                   "readonly": [], "cookies": []}).encode()}
    for i, b in enumerate(md.segments[0].ensemble):
        held = [e for e in expected_entries(md, b) if not (b == "bk2:3181" and 40 <= e <= 59)]
        files[f"entries-of-ledger/{b}/3.pb"] = encode_response(i, 3, "EOK", encode_entries(held))
    for key, data in files.items():
        (c / key).parent.mkdir(parents=True, exist_ok=True)
        (c / key).write_bytes(data)
    return root / "raw"


def _check_outputs(spark, attempt: Path):
    frag = spark.read.parquet(str(attempt / "findings" / "bk_missing_fragments")).collect()
    assert [(f["bookie"], f["missing_count"], [(r["first"], r["last"]) for r in f["missing_ranges"]])
            for f in frag] == [("bk2:3181", 13, [(40, 58)])]
    (m,) = spark.read.parquet(str(attempt / "metrics" / "bk_ledger_replicas")).collect()
    assert (m["least_replicas"], m["entries_below_ack_quorum"], m["entries"]) == (1, 13, 100)
    checks = sorted(v["check"] for v in spark.read.parquet(str(attempt / "findings" / "violations")).collect())
    assert checks == ["bk.entries_below_ack_quorum"]


def test_jobs_in_process(spark, tmp_path):
    raw = _raw(tmp_path)
    counts = run.main(["--system", "bookkeeper", "--stage", "normalize", "--input", str(raw),
                       "--output", str(tmp_path / "tables")])
    assert counts == {"bk_ledgers": 1, "bk_entry_availability": 3, "bk_bookies": 3, "bk_bookie_evidence": 0,
                      "quarantine": 0}
    out = run.main(["--system", "bookkeeper", "--stage", "audit", "--input", str(tmp_path / "tables"),
                    "--output", str(tmp_path), "--run-id", "r9", "--as-of-ms", "1000", "--set", "open_ledger_max_age=10"])
    assert out["metrics"] == 1 and out["violations_by_check"] == {"bk.entries_below_ack_quorum": 1}
    _check_outputs(spark, tmp_path)


def test_bad_arguments_name_the_problem(tmp_path, capsys):
    with pytest.raises(SystemExit):
        run.main(["--system", "bookkeeper", "--stage", "audit", "--input", str(tmp_path), "--output", str(tmp_path)])
    assert "bk_ledgers/ not found" in capsys.readouterr().err


@pytest.mark.skipif(not (REPO / ".venv" / "bin" / "spark-submit").exists(), reason="needs .venv/bin/spark-submit")
def test_spark_submit(spark, tmp_path):
    raw = _raw(tmp_path)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    submit = str(REPO / ".venv" / "bin" / "spark-submit")
    for args in (["--stage", "normalize", "--input", str(raw), "--output", str(tmp_path / "tables")],
                 ["--stage", "audit", "--input", str(tmp_path / "tables"), "--output", str(tmp_path)]):
        proc = subprocess.run([submit, "--master", "local[1]", "--conf", "spark.ui.enabled=false",
                               str(REPO / "spark_jobs" / "run.py"), "--system", "bookkeeper", *args],
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
    _check_outputs(spark, tmp_path)


@pytest.mark.parametrize("status, unavailable, checks", [
    # NoSuchLedger: the bookie holds nothing, so its share of the entries is missing (Auditor: EMPTY availability)
    ("ENOLEDGER", 0, ["bk.entries_below_ack_quorum"]),
    # NoSuchEntry (and any other failure) is an unavailable bookie, never "holds nothing" (AuditorReplicasCheckTask)
    ("ENOENTRY", 1, []),
])
def test_only_no_such_ledger_means_the_bookie_holds_nothing(spark, tmp_path, status, unavailable, checks):
    raw = _raw(tmp_path)
    (raw / "bookkeeper" / "bk-a" / "entries-of-ledger" / "bk2:3181" / "3.pb").write_bytes(
        encode_response(1, 3, status, None))
    run.main(["--system", "bookkeeper", "--stage", "normalize", "--input", str(raw),
              "--output", str(tmp_path / "tables")])
    out = run.main(["--system", "bookkeeper", "--stage", "audit", "--input", str(tmp_path / "tables"),
                    "--output", str(tmp_path), "--run-id", "r1"])
    (m,) = spark.read.parquet(str(tmp_path / "metrics" / "bk_ledger_replicas")).collect()
    assert m["unavailable_bookies"] == unavailable
    assert sorted(out["violations_by_check"]) == checks
