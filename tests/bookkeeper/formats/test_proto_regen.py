"""The committed *_pb2.py must be exactly what regen.sh produces from the .proto files."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from audit.systems.bookkeeper.formats.proto import DataFormats_pb2

PROTO_DIR = Path(__file__).resolve().parents[3] / "audit" / "systems" / "bookkeeper" / "formats" / "proto"
GENERATED = ["DataFormats_pb2.py", "BookkeeperProtocol_pb2.py"]


def test_committed_pb2_match_regeneration(tmp_path):
    pytest.importorskip("grpc_tools")
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(PROTO_DIR / "regen.sh"), str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for name in GENERATED:
        fresh, committed = (tmp_path / name).read_text(), (PROTO_DIR / name).read_text()
        if fresh != committed:
            versions = [re.search(r"Protobuf Python Version: (\S+)", t) for t in (fresh, committed)]
            pytest.fail(f"{name} drifted from its .proto (or protoc differs: generated "
                        f"{versions[0] and versions[0].group(1)} vs committed {versions[1] and versions[1].group(1)}); "
                        f"run audit/systems/bookkeeper/formats/proto/regen.sh with the pinned grpcio-tools")


def test_ledger_metadata_format_field_numbers():
    fields = {f.name: f.number for f in DataFormats_pb2.LedgerMetadataFormat.DESCRIPTOR.fields}
    assert fields == {"quorumSize": 1, "ensembleSize": 2, "length": 3, "lastEntryId": 4, "state": 5, "segment": 6,
                      "digestType": 7, "password": 8, "ackQuorumSize": 9, "ctime": 10, "customMetadata": 11,
                      "cToken": 12}
    fmt = DataFormats_pb2.LedgerMetadataFormat
    assert [fmt.State.Value(n) for n in ("OPEN", "IN_RECOVERY", "CLOSED")] == [1, 2, 3]
    assert [fmt.DigestType.Value(n) for n in ("CRC32", "HMAC", "CRC32C", "DUMMY")] == [1, 2, 3, 4]
    seg = {f.name: f.number for f in fmt.Segment.DESCRIPTOR.fields}
    entry = {f.name: f.number for f in fmt.cMetadataMapEntry.DESCRIPTOR.fields}
    assert seg == {"ensembleMember": 1, "firstEntryId": 2} and entry == {"key": 1, "value": 2}
