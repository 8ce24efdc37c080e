"""Test data for the BookKeeper collectors: ledger metadata znodes in the three ZooKeeper layouts."""
from __future__ import annotations

import base64
from pathlib import Path

from audit.systems.bookkeeper.domain.model import CLOSED, LedgerMetadata, Segment
from audit.systems.bookkeeper.formats.ledger_metadata import encode_znode

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
PASSWORD = b"hunter2-ledger-pw"


def real_znode(version: int) -> bytes:
    """BookKeeper's own test vectors (TestLedgerMetadataSerDe); passwords "passwd" (v2) and "foobar" (v3)."""
    return base64.b64decode((REAL / f"bk-ledgermetadata-znode-v{version}.b64").read_text())


def flat_path(ledger_id: int) -> str:
    return f"L{ledger_id:010d}"


def legacy_path(ledger_id: int) -> str:
    s = f"{ledger_id:010d}"
    return f"{s[:2]}/{s[2:6]}/L{s[6:]}"


def long_path(ledger_id: int) -> str:
    s = f"{ledger_id:019d}"
    return f"{s[:3]}/{s[3:7]}/{s[7:11]}/{s[11:15]}/L{s[15:]}"


def closed_ledger(ledger_id: int, segments: list[tuple[int, tuple[str, ...]]], last_entry_id: int = 9,
                  write_quorum: int = 2, ack_quorum: int = 2) -> LedgerMetadata:
    return LedgerMetadata(
        ledger_id=ledger_id, format_version=3, ensemble_size=len(segments[0][1]), write_quorum_size=write_quorum,
        ack_quorum_size=ack_quorum, state=CLOSED, last_entry_id=last_entry_id, length=100 * (last_entry_id + 1),
        segments=tuple(Segment(first, ens) for first, ens in segments), digest_type="CRC32C", has_password=True,
        ctime=1700000000000, custom_metadata={"application": b"pulsar"})


def znode(md: LedgerMetadata, version: int = 3) -> bytes:
    return encode_znode(md, version=version, password=PASSWORD if md.has_password and version > 1 else b"")
