"""spark_jobs/run.py for BookKeeper in-process (same session) and a stage through spark-submit."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from audit.systems.bookkeeper.formats.availability import encode_entries
from audit.systems.bookkeeper.formats.ledger_metadata import encode_znode
from audit.systems.bookkeeper.formats.protocol import encode_response
from spark_jobs import run
from tests.bookkeeper.domain.cases import expected_entries, ledger

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
                    "--output", str(tmp_path), "--run-id", "r9", "--as-of-ms", "1000",
                    "--set", "open_ledger_max_age=10"])
    assert out["metrics"] == 1 and out["violations_by_check"] == {"bk.entries_below_ack_quorum": 1}
    _check_outputs(spark, tmp_path)


def test_bad_arguments_name_the_problem(tmp_path, capsys):
    with pytest.raises(SystemExit):
        run.main(["--system", "bookkeeper", "--stage", "audit", "--input", str(tmp_path), "--output", str(tmp_path)])
    assert "bk_ledgers/ not found" in capsys.readouterr().err


@pytest.mark.skipif(not (REPO / ".venv" / "bin" / "spark-submit").exists(), reason="needs .venv/bin/spark-submit")
def test_spark_submit(spark, tmp_path):
    """The normalize stage through spark-submit (its own JVM and session), the audit in-process on its output: the
    entry point and its arguments work outside the test's session. tests/deploy submits the audit stage to a
    standalone cluster."""
    raw = _raw(tmp_path)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    submit = str(REPO / ".venv" / "bin" / "spark-submit")
    proc = subprocess.run([submit, "--master", "local[1]", "--conf", "spark.ui.enabled=false",
                           "--driver-java-options", "-XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:+UseSerialGC",
                           str(REPO / "spark_jobs" / "run.py"), "--system", "bookkeeper", "--stage", "normalize",
                           "--input", str(raw), "--output", str(tmp_path / "tables")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run.main(["--system", "bookkeeper", "--stage", "audit", "--input", str(tmp_path / "tables"),
              "--output", str(tmp_path)])
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


def test_enoentry_from_a_bookie_is_unavailable_through_collector_normalize_and_audit(spark, tmp_path):
    """The same rule end to end: a lab bookie on loopback answers GetListOfEntriesOfLedger with ENOENTRY for one
    ledger and ENOLEDGER for another; the real client stores the answers, normalize and audit judge them."""
    from audit.collectors.base import DirSink
    from audit.systems.bookkeeper.collect.bookie_client import BookieClientConfig, collect_entries_of_ledgers
    from lab.bookkeeper import build_lab
    from lab.bookkeeper.bookie_server import serve_lab_bookies

    lab = build_lab({"seed": 3, "ledgers": 12, "entries_per_ledger": 40, "db_ledger_storage_percent": 0,
                     "faults": []}, 1_700_000_000_000, cluster="bk-a")
    assert lab.ground_truth()["findings"] == []   # healthy: only the two answers below can make a finding
    judged = [lid for lid in lab.ledger_ids if lid not in lab.state.deleted_during_collection
              and lab.metadata(lid).is_closed and lab.metadata(lid).last_entry_id >= 0]
    bookie, (no_entry, no_ledger) = next(
        (b, ids[:2]) for b in lab.bookies
        for ids in [[lid for lid in judged if b in lab.ensemble_bookies(lid) and lab.entries_on(b, lid)]]
        if len(ids) >= 2)
    raw = tmp_path / "raw"
    sink = DirSink(raw / "bookkeeper" / "bk-a")
    for lid in (no_entry, no_ledger):
        sink.put(f"ledger-metadata/{lab.znode_path(lid)}", lab.znode(lid))
    by_bookie = {b: [lid for lid in (no_entry, no_ledger) if b in lab.ensemble_bookies(lid)]
                 for b in {*lab.ensemble_bookies(no_entry), *lab.ensemble_bookies(no_ledger)}}
    cfg = BookieClientConfig(connect_timeout_s=2.0, request_timeout_s=5.0, list_probe_timeout_s=1.0)
    with serve_lab_bookies(lab, list_status={bookie: {no_entry: "ENOENTRY", no_ledger: "ENOLEDGER"}}) as addresses:
        report = collect_entries_of_ledgers(by_bookie, sink, addresses=addresses, config=cfg, cluster="bk-a")
    sink.put("collection.json", report.to_json().encode())
    # the collector: the ENOENTRY answer is stored as received and is a coverage gap; ENOLEDGER is an answer
    assert [(g.source, g.error) for g in report.gaps] == [(f"bookie://{bookie}", "bookie answered ENOENTRY")]
    assert (report.counts["entries_of_ledger_status_ENOENTRY"], report.counts["entries_of_ledger_status_ENOLEDGER"]) \
        == (1, 1)

    run.main(["--system", "bookkeeper", "--stage", "normalize", "--input", str(raw),
              "--output", str(tmp_path / "tables")])
    out = run.main(["--system", "bookkeeper", "--stage", "audit", "--input", str(tmp_path / "tables"),
                    "--output", str(tmp_path), "--run-id", "r1"])
    avail = {r["ledger_id"]: (r["status"], r["error"]) for r in
             spark.read.parquet(str(tmp_path / "tables" / "bk_entry_availability")).collect() if r["bookie"] == bookie}
    assert avail == {no_entry: ("error", "bookie answered ENOENTRY"), no_ledger: ("no_such_ledger", "ENOLEDGER")}
    m = {r["ledger_id"]: r for r in spark.read.parquet(str(tmp_path / "metrics" / "bk_ledger_replicas")).collect()}
    assert (m[no_entry]["unavailable_bookies"], m[no_ledger]["unavailable_bookies"]) == (1, 0)
    # ENOENTRY: never missing entries; ENOLEDGER: the bookie holds nothing, so its whole share is missing
    frags = {(f["ledger_id"], f["bookie"]): f["missing_count"]
             for f in spark.read.parquet(str(tmp_path / "findings" / "bk_missing_fragments")).collect()}
    assert frags == {(no_ledger, bookie): len(expected_entries(lab.metadata(no_ledger), bookie))}
    subjects = {v["subject"] for v in spark.read.parquet(str(tmp_path / "findings" / "violations")).collect()}
    assert f"ledger {no_ledger}" in subjects and f"ledger {no_entry}" not in subjects
    assert out["violations_by_check"]
