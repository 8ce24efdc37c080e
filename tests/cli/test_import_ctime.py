"""Ledger znodes imported by hand with their Stat beside them, `replaudit run --from-raw`: an OPEN v3 ledger without a
stored ctime field (shipped client default, storeSystemtimeAsLedgerCreationTime false) is aged by its znode's
ZooKeeper ctime; the real v3 test vector, whose field is present with -1, has an unknown age with or without a Stat
(LedgerMetadataSerDe.parseVersion3Config: a present field wins) and is not reported (never as created in 1970)."""
from __future__ import annotations

import base64
import json
from pathlib import Path

from audit.cli.main import EXIT_CLEAN, EXIT_INCOMPLETE, EXIT_VIOLATIONS, main
from audit.systems.bookkeeper.domain.model import OPEN
from audit.systems.bookkeeper.formats.ledger_metadata import encode_znode
from tests.bookkeeper.domain.cases import ledger
from tests.estates import write_lab_estate

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
DAY_MS = 86_400_000


def _stat(ctime: int, length: int) -> str:
    return json.dumps({"czxid": 7, "mzxid": 7, "ctime": ctime, "mtime": ctime, "version": 0, "cversion": 0,
                       "aversion": 0, "ephemeralOwner": 0, "dataLength": length, "numChildren": 0, "pzxid": 7})


def test_open_ledger_of_a_default_client_is_aged_by_its_znode_ctime(tmp_path, capsys):
    estate = write_lab_estate(tmp_path / "estate.yaml", estate="ctime", store=f'{{uri: "file://{tmp_path / "s"}"}}',
                              cluster="bk-a", lab="{seed: 5, ledgers: 24}")
    v3 = base64.b64decode((REAL / "bk-ledgermetadata-znode-v3.b64").read_text())
    no_field = encode_znode(ledger({0: ["192.0.2.1:3181", "192.0.2.2:3181"]}, -1, state=OPEN, ledger_id=23))
    dump = tmp_path / "dump" / "00" / "0000"
    dump.mkdir(parents=True)
    (dump / "L0020").write_bytes(v3)
    (dump / "L0020.stat.json").write_text(_stat(1_000 * DAY_MS, len(v3)))   # ignored: the stored -1 wins
    (dump / "L0021").write_bytes(v3)                                       # hand-taken without its Stat
    (dump / "L0023").write_bytes(no_field)
    (dump / "L0023.stat.json").write_text(_stat(1_000 * DAY_MS, len(no_field)))   # created long before any run
    assert main(["import", "--estate", str(estate), "--run-id", "dump", "--system", "bookkeeper",
                 "--cluster", "bk-a", "--kind", "ledger-metadata", str(tmp_path / "dump")]) == EXIT_CLEAN
    assert json.loads(capsys.readouterr().out)["stored"] == 5     # three znodes and the Stats beside two
    # a Stat that is not one is refused at import, naming the file and the field, and not stored
    bad = tmp_path / "bad" / "00" / "0000"
    bad.mkdir(parents=True)
    (bad / "L0022.stat.json").write_text('{"ctime": "yesterday"}')
    assert main(["import", "--estate", str(estate), "--run-id", "dump2", "--system", "bookkeeper",
                 "--cluster", "bk-a", "--kind", "ledger-metadata", str(tmp_path / "bad")]) == EXIT_INCOMPLETE
    (rejected,) = json.loads(capsys.readouterr().out)["rejected"]
    assert "L0022.stat.json" in rejected["reason"] and "field czxid" in rejected["reason"]
    assert main(["run", "--estate", str(estate), "--run-id", "r", "--from-raw", "dump", "--json"]) == EXIT_VIOLATIONS
    summary = json.loads(capsys.readouterr().out)
    assert summary["counts"]["by_check"] == {"bk.ledger_open_too_long": 1}     # L0023
    assert summary["metrics"]["open_ctime_unknown"] == {"bk-a": 2}      # L0020 and L0021: said, not guessed
