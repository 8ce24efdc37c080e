"""The committed PulsarMarkers_pb2.py must be exactly what regen.sh produces from PulsarMarkers.proto."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from audit.systems.pulsar.formats.proto import PulsarMarkers_pb2 as pb

PROTO_DIR = Path(__file__).resolve().parents[3] / "audit" / "systems" / "pulsar" / "formats" / "proto"


def test_committed_pb2_matches_regeneration(tmp_path):
    pytest.importorskip("grpc_tools")
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(PROTO_DIR / "regen.sh"), str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    name = "PulsarMarkers_pb2.py"
    fresh, committed = (tmp_path / name).read_text(), (PROTO_DIR / name).read_text()
    if fresh != committed:
        versions = [re.search(r"Protobuf Python Version: (\S+)", t) for t in (fresh, committed)]
        pytest.fail(f"{name} drifted from its .proto (or protoc differs: generated "
                    f"{versions[0] and versions[0].group(1)} vs committed {versions[1] and versions[1].group(1)}); "
                    f"run audit/systems/pulsar/formats/proto/regen.sh with the pinned grpcio-tools")


def test_field_numbers_match_formats_md():
    def fields(msg):
        return {f.name: f.number for f in msg.DESCRIPTOR.fields}

    assert fields(pb.ReplicatedSubscriptionsSnapshotRequest) == {"snapshot_id": 1, "source_cluster": 2}
    assert fields(pb.ReplicatedSubscriptionsSnapshotResponse) == {"snapshot_id": 1, "cluster": 2}
    assert fields(pb.ReplicatedSubscriptionsSnapshot) == {"snapshot_id": 1, "local_message_id": 2, "clusters": 3}
    assert fields(pb.ReplicatedSubscriptionsUpdate) == {"subscription_name": 1, "clusters": 2}
    assert fields(pb.ClusterMessageId) == {"cluster": 1, "message_id": 2}
    assert fields(pb.MarkersMessageIdData) == {"ledger_id": 1, "entry_id": 2}
