"""Marker payloads: encode/decode round trips, field numbers on the wire, and bad input."""
from __future__ import annotations

import pytest

from audit.errors import PayloadError
from audit.systems.pulsar.formats import markers as m
from audit.systems.pulsar.formats.proto import PulsarMarkers_pb2 as pb

SRC = "raw/pulsar/east/topics/t/ns/x/dump/7/0-9.jsonl:line 3"
NONE = {"snapshot_id": None, "source_cluster": None, "local_ledger": None, "local_entry": None,
        "subscription": None, "clusters": None}


def test_request_bytes_are_field_1_and_2():
    # tag 0x0a = field 1 (length-delimited), 0x12 = field 2: hand-checked against docs/formats/pulsar.md §2.5
    assert m.encode_snapshot_request("ab", "east") == b"\x0a\x02ab\x12\x04east"
    assert m.decode_marker(10, b"\x0a\x02ab\x12\x04east", SRC) == {
        **NONE, "marker_type": 10, "name": "snapshot_request", "snapshot_id": "ab", "source_cluster": "east"}


def test_response_carries_one_cluster():
    data = m.encode_snapshot_response("s-1", "west", 12, 7)
    # ClusterMessageId{1: "west", 2: MarkersMessageIdData{1: 12, 2: 7}}
    assert data == b"\x0a\x03s-1\x12\x0c\x0a\x04west\x12\x04\x08\x0c\x10\x07"
    assert m.decode_marker(11, data, SRC) == {**NONE, "marker_type": 11, "name": "snapshot_response",
                                              "snapshot_id": "s-1",
                                              "clusters": [{"cluster": "west", "ledger_id": 12, "entry_id": 7}]}


def test_snapshot_and_update_round_trip():
    snap = m.decode_marker(12, m.encode_snapshot("s-2", (5, 3), {"west": (12, 7), "south": (40, 0)}), SRC)
    assert snap == {**NONE, "marker_type": 12, "name": "snapshot", "snapshot_id": "s-2", "local_ledger": 5,
                    "local_entry": 3, "clusters": [{"cluster": "west", "ledger_id": 12, "entry_id": 7},
                                                   {"cluster": "south", "ledger_id": 40, "entry_id": 0}]}
    upd = m.decode_marker(13, m.encode_update("orders-sub", {"west": (12, 7)}), SRC)
    assert upd == {**NONE, "marker_type": 13, "name": "update", "subscription": "orders-sub",
                   "clusters": [{"cluster": "west", "ledger_id": 12, "entry_id": 7}]}


@pytest.mark.parametrize("marker_type, name", [(20, "txn_committing"), (21, "txn_commit"), (22, "txn_abort")])
def test_transaction_markers_decode_as_type_only(marker_type, name):
    assert m.decode_marker(marker_type, b"\xff\xfe", SRC) == {**NONE, "marker_type": marker_type, "name": name}


@pytest.mark.parametrize("marker_type", [0, 1, 14, 23, -1, True])
def test_unknown_marker_type(marker_type):
    with pytest.raises(PayloadError) as e:
        m.decode_marker(marker_type, b"", SRC)
    assert (e.value.source, e.value.field, e.value.expected) == (SRC, "marker_type", "one of 10,11,12,13,20,21,22")


def test_missing_required_field_is_named():
    with pytest.raises(PayloadError) as e:
        m.decode_marker(13, pb.ReplicatedSubscriptionsUpdate().SerializePartialToString(), SRC)
    assert e.value.field == "ReplicatedSubscriptionsUpdate.subscription_name"


def test_truncated_payload():
    data = m.encode_snapshot("s-2", (5, 3), {"west": (12, 7)})
    with pytest.raises(PayloadError) as e:
        m.decode_marker(12, data[:-1], SRC)
    assert e.value.field == "payload" and "ReplicatedSubscriptionsSnapshot" in e.value.expected


def test_enum_values_match_formats_md():
    assert {n: pb.MarkerType.Value(n) for n in pb.MarkerType.keys()} == {
        "UNKNOWN_MARKER": 0, "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST": 10,
        "REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE": 11, "REPLICATED_SUBSCRIPTION_SNAPSHOT": 12,
        "REPLICATED_SUBSCRIPTION_UPDATE": 13, "TXN_COMMITTING": 20, "TXN_COMMIT": 21, "TXN_ABORT": 22}


def test_invalid_utf8_text_is_rejected():
    with pytest.raises(PayloadError) as e:
        m.decode_marker(10, b"\x0a\x02\xff\xfe", SRC)
    assert (e.value.field, e.value.expected) == ("ReplicatedSubscriptionsSnapshotRequest.snapshot_id", "UTF-8 text")
    bad_cluster = m.encode_update("s", {"west": (1, 2)}).replace(b"west", b"w\xffst")
    with pytest.raises(PayloadError) as e:
        m.decode_marker(13, bad_cluster, SRC)
    assert e.value.field == "ReplicatedSubscriptionsUpdate.clusters.cluster"
