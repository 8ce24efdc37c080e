"""`replaudit` through its real entry point: exit codes, inspect, bad estate files, run, import + --from-raw."""
from __future__ import annotations

import base64
import json
from pathlib import Path


from audit.cli.main import EXIT_CLEAN, EXIT_INCOMPLETE, EXIT_USAGE, EXIT_VIOLATIONS, main
from tests.estates import write_lab_estate

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def _estate(tmp_path: Path, lab: str = "{seed: 5, ledgers: 24}", pulsar: bool = False) -> Path:
    return write_lab_estate(tmp_path / "estate.yaml", estate="clitest", store=f'{{uri: "file://{tmp_path / "store"}"}}',
                            cluster="bk-a", lab=lab, pulsar=pulsar)


def test_inspect_decodes_a_real_v3_znode(tmp_path, capsys):
    raw = tmp_path / "L0001"
    raw.write_bytes(base64.b64decode((REAL / "bk-ledgermetadata-znode-v3.b64").read_text()))
    assert main(["inspect", str(raw)]) == EXIT_CLEAN
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "bookkeeper.ledger_metadata_znode"
    assert "foobar" not in json.dumps(out)   # the password never reaches the output


def test_inspect_unknown_payload_names_the_file(tmp_path, capsys):
    bad = tmp_path / "junk.bin"
    bad.write_bytes(b"\x00\x01 certainly not a payload")
    assert main(["inspect", str(bad)]) == EXIT_INCOMPLETE
    assert "junk.bin" in capsys.readouterr().err


def test_estate_typo_is_a_usage_error_naming_file_and_field(tmp_path, capsys):
    p = tmp_path / "estate.yaml"
    p.write_text("estate: x\nstore: {ur1: file:///tmp/x}\nsystems: {}\n")
    assert main(["run", "--estate", str(p)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "estate.yaml" in err and "store.ur1" in err and "uri" in err


def test_run_then_report_and_import_then_from_raw(tmp_path, capsys):
    estate = _estate(tmp_path, pulsar=True)
    assert main(["run", "--estate", str(estate), "--run-id", "r1", "--json"]) == EXIT_VIOLATIONS
    summary = json.loads(capsys.readouterr().out)
    lab = summary["lab"]
    assert summary["status"] == "violations" and lab["missed"] == 0, lab["missed_items"]
    assert lab["false_alarms"] == 0 and lab["wrong_count"] == 0, (lab["false_alarm_items"], lab["wrong_count_items"])
    # Pulsar: the predicted failover redeliveries / skips / losses equal what the simulated failover did,
    # pair by pair (zeros included), and every injected Pulsar fault was found
    assert (lab["failover"]["perfect"]
            and lab["failover"]["matched"] == lab["failover"]["expected"] > 20), lab["failover"]
    assert {c for c in lab["by_check"] if c.startswith("pulsar.")} >= {
        "pulsar.failover_redelivery", "pulsar.failover_skip", "pulsar.failover_loss", "pulsar.snapshot_timeout",
        "pulsar.replicated_subscription_one_way", "pulsar.replicator_disconnected"}
    # every GX suite ran (none skipped or broken) and failed on the lab's faults
    assert {s["name"]: s["status"] for s in summary["validation"]["suites"]} == {
        "bk_ledger_replicas": "failed", "violations": "failed", "pulsar_failover": "failed",
        "pulsar_violations": "failed"}

    assert main(["report", "--estate", str(estate), "--run-id", "r1", "--json"]) == EXIT_VIOLATIONS
    assert json.loads(capsys.readouterr().out)["run_id"] == "r1"

    # hand-taken dumps: r1's raw evidence imported kind by kind into one run, audited without collecting
    raw = next((tmp_path / "store" / "clitest" / "runs" / "r1" / "attempts").iterdir()) / "raw" / "bookkeeper" / "bk-a"
    for kind in ("ledger-metadata", "entries-of-ledger", "location-index", "read-probes", "bookies"):
        assert main(["import", "--estate", str(estate), "--run-id", "imp", "--system", "bookkeeper",
                     "--cluster", "bk-a", "--kind", kind, str(raw / kind)]) == EXIT_CLEAN
    capsys.readouterr()
    # bad input: a truncated znode is refused at import (it cannot be redacted safely), naming the file ...
    truncated = tmp_path / "dump" / "00" / "0000" / "L9999"
    truncated.parent.mkdir(parents=True)
    truncated.write_bytes(b"BookieMetadataFormatVersion\t3\n\x60\x08\x02")
    assert main(["import", "--estate", str(estate), "--run-id", "imp", "--system", "bookkeeper", "--cluster", "bk-a",
                 "--kind", "ledger-metadata", str(tmp_path / "dump")]) == EXIT_INCOMPLETE
    rejected = json.loads(capsys.readouterr().out)["rejected"]
    assert len(rejected) == 1 and "L9999" in rejected[0]["file"] and "field" in rejected[0]["reason"]
    # ... and a bookie answer of the wrong length is kept as evidence, quarantined, and reported as not covered
    bogus = tmp_path / "bogus" / "4242.pb"
    bogus.parent.mkdir()
    bogus.write_bytes(b"\x08\x03\x10\x00 truncated")
    assert main(["import", "--estate", str(estate), "--run-id", "imp", "--system", "bookkeeper", "--cluster", "bk-a",
                 "--kind", "entries-of-ledger", "--bookie", "bookie-01.lab:3181", str(bogus)]) == EXIT_CLEAN
    capsys.readouterr()
    assert main(["run", "--estate", str(estate), "--run-id", "r2", "--from-raw", "imp", "--json"]) == EXIT_VIOLATIONS
    again = json.loads(capsys.readouterr().out)
    # only BookKeeper evidence was imported; the run went on for everything else
    assert again["counts"]["by_check"] == {c: n for c, n in summary["counts"]["by_check"].items()
                                           if c.startswith("bk.")}
    assert any("4242.pb" in str(g.get("source")) for g in again["coverage_gaps"])


def test_run_of_a_missing_raw_run_is_a_usage_error(tmp_path, capsys):
    assert main(["run", "--estate", str(_estate(tmp_path)), "--from-raw", "nope"]) == EXIT_USAGE
    assert "nope" in capsys.readouterr().err


def test_a_crash_is_exit_4_never_1(tmp_path, capsys, monkeypatch):
    from audit import pipeline
    from audit.cli.main import EXIT_FAILURE

    def broken(*a, **k):
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(pipeline, "run_all", broken)
    assert main(["run", "--estate", str(_estate(tmp_path))]) == EXIT_FAILURE
    assert "internal failure: RuntimeError: disk on fire" in capsys.readouterr().err
