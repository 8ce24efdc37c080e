"""`replaudit import --system pulsar`: hand-taken pulsar-admin outputs land in the collectors' raw layout."""
from __future__ import annotations

import json
from pathlib import Path

from audit.cli.main import EXIT_CLEAN, EXIT_USAGE, main

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"


def _estate(tmp_path: Path) -> Path:
    p = tmp_path / "estate.yaml"
    p.write_text(f'estate: imp\nstore: {{uri: "file://{tmp_path / "store"}"}}\n'
                 "systems:\n  pulsar:\n    - {name: east, source: lab}\n")
    return p


def _raw(tmp_path: Path, run_id: str) -> Path:
    return next((tmp_path / "store" / "imp" / "runs" / run_id / "attempts").iterdir()) / "raw"


def test_stats_internal_status_and_dump_are_stored_byte_for_byte(tmp_path, capsys):
    estate = _estate(tmp_path)
    topic = "persistent://public/default/orders-partition-0"
    fixture = REAL / "pulsar-stats-internal-01.json"
    assert main(["import", "--estate", str(estate), "--run-id", "i1", "--system", "pulsar", "--cluster", "east",
                 "--kind", "stats-internal", "--topic", topic, str(fixture)]) == EXIT_CLEAN
    status = tmp_path / "status.json"
    status.write_text('{"persistent://public/default/orders-partition-0": true}')
    assert main(["import", "--estate", str(estate), "--run-id", "i1", "--system", "pulsar", "--cluster", "east",
                 "--kind", "replicated-status", "--topic", topic, "--subscription", "billing/eu", str(status)]) \
        == EXIT_CLEAN
    chunks = tmp_path / "dump" / "12"
    chunks.mkdir(parents=True)
    (chunks / "0-1.jsonl").write_bytes(b'{"ledger_id": 12, "entry_id": 0, "status": 404, "error": "x"}\n')
    capsys.readouterr()
    assert main(["import", "--estate", str(estate), "--run-id", "i1", "--system", "pulsar", "--cluster", "east",
                 "--kind", "dump", "--topic", topic, str(tmp_path / "dump")]) == EXIT_CLEAN
    assert json.loads(capsys.readouterr().out)["stored"] == 1
    folder = _raw(tmp_path, "i1") / "pulsar" / "east" / "topics" / "public" / "default" / "orders-partition-0"
    assert (folder / "stats-internal.json").read_bytes() == fixture.read_bytes()
    assert (folder / "subscriptions" / "billing%2Feu" / "replicated-status.json").read_bytes() == status.read_bytes()
    assert (folder / "dump" / "12" / "0-1.jsonl").read_bytes().startswith(b'{"ledger_id": 12')


def test_bad_pulsar_import_is_a_usage_error(tmp_path, capsys):
    estate = _estate(tmp_path)
    fixture = str(REAL / "pulsar-stats-internal-01.json")
    base = ["import", "--estate", str(estate), "--system", "pulsar", "--cluster", "east"]
    assert main(base + ["--kind", "stats-internal", "--topic", "orders", fixture]) == EXIT_USAGE
    assert "persistent://tenant/namespace/topic" in capsys.readouterr().err
    assert main(base + ["--kind", "ledger-metadata", "--topic", "persistent://a/b/c", fixture]) == EXIT_USAGE
    assert "stats-internal" in capsys.readouterr().err
    assert main(base + ["--kind", "replicated-status", "--topic", "persistent://a/b/c", fixture]) == EXIT_USAGE
    assert "--subscription" in capsys.readouterr().err
