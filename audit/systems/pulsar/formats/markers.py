"""Marker payloads (docs/formats/pulsar.md §2.5): replicated-subscription markers 10..13 (our copy of their schema is
formats/proto/) and the transaction markers 20..22, which carry their meaning in the message metadata, not in the
payload.

`decode_marker` returns one dict shape for every type (keys absent for a type are None) so that rows of
pulsar_entries can be filled without per-type code:
  marker_type, name, snapshot_id, source_cluster, local_ledger, local_entry, subscription,
  clusters ([{cluster, ledger_id, entry_id}]; a response's single `cluster` is a one-item list)."""
from __future__ import annotations

from google.protobuf.message import DecodeError

from audit.errors import PayloadError
from audit.systems.pulsar.formats.proto import PulsarMarkers_pb2 as pb

SNAPSHOT_REQUEST, SNAPSHOT_RESPONSE, SNAPSHOT, UPDATE = 10, 11, 12, 13
TXN_COMMITTING, TXN_COMMIT, TXN_ABORT = 20, 21, 22
NAMES = {SNAPSHOT_REQUEST: "snapshot_request", SNAPSHOT_RESPONSE: "snapshot_response", SNAPSHOT: "snapshot",
         UPDATE: "update", TXN_COMMITTING: "txn_committing", TXN_COMMIT: "txn_commit", TXN_ABORT: "txn_abort"}
EXPECTED_TYPES = "one of 10,11,12,13,20,21,22"
_MESSAGES = {SNAPSHOT_REQUEST: pb.ReplicatedSubscriptionsSnapshotRequest,
             SNAPSHOT_RESPONSE: pb.ReplicatedSubscriptionsSnapshotResponse,
             SNAPSHOT: pb.ReplicatedSubscriptionsSnapshot, UPDATE: pb.ReplicatedSubscriptionsUpdate}

Clusters = dict[str, tuple[int, int]]


def _cluster_ids(clusters: Clusters) -> list[pb.ClusterMessageId]:
    return [pb.ClusterMessageId(cluster=name, message_id=pb.MarkersMessageIdData(ledger_id=l, entry_id=e))
            for name, (l, e) in clusters.items()]


def encode_snapshot_request(snapshot_id: str, source_cluster: str) -> bytes:
    return pb.ReplicatedSubscriptionsSnapshotRequest(snapshot_id=snapshot_id,
                                                     source_cluster=source_cluster).SerializeToString()


def encode_snapshot_response(snapshot_id: str, cluster: str, ledger_id: int, entry_id: int) -> bytes:
    (cid,) = _cluster_ids({cluster: (ledger_id, entry_id)})
    return pb.ReplicatedSubscriptionsSnapshotResponse(snapshot_id=snapshot_id, cluster=cid).SerializeToString()


def encode_snapshot(snapshot_id: str, local: tuple[int, int], clusters: Clusters) -> bytes:
    return pb.ReplicatedSubscriptionsSnapshot(
        snapshot_id=snapshot_id, local_message_id=pb.MarkersMessageIdData(ledger_id=local[0], entry_id=local[1]),
        clusters=_cluster_ids(clusters)).SerializeToString()


def encode_update(subscription: str, clusters: Clusters) -> bytes:
    return pb.ReplicatedSubscriptionsUpdate(subscription_name=subscription,
                                            clusters=_cluster_ids(clusters)).SerializeToString()


def _text(value: object, source: str, field: str) -> str:
    # proto2 strings are not UTF-8 checked on parse: the runtime hands back bytes instead
    if not isinstance(value, str):
        raise PayloadError(source, field, "UTF-8 text", value)
    return value


def _clusters(items, source: str, where: str) -> list[dict]:
    return [{"cluster": _text(c.cluster, source, f"{where}.cluster"), "ledger_id": c.message_id.ledger_id,
             "entry_id": c.message_id.entry_id} for c in items]


def _parse(marker_type: int, payload: bytes, source: str):
    cls = _MESSAGES[marker_type]
    msg = cls()
    try:
        msg.ParseFromString(payload)
    except DecodeError as e:
        raise PayloadError(source, "payload", f"a {cls.__name__} protobuf ({e})", payload[:32]) from None
    missing = msg.FindInitializationErrors()  # proto2 `required` fields are not enforced by every runtime
    if missing:
        raise PayloadError(source, f"{cls.__name__}.{missing[0]}", "a value (required field)")
    return msg


def decode_marker(marker_type: int, payload: bytes, source: str) -> dict:
    if isinstance(marker_type, bool) or marker_type not in NAMES:
        raise PayloadError(source, "marker_type", EXPECTED_TYPES, marker_type)
    out = {"marker_type": marker_type, "name": NAMES[marker_type], "snapshot_id": None, "source_cluster": None,
           "local_ledger": None, "local_entry": None, "subscription": None, "clusters": None}
    if marker_type not in _MESSAGES:
        return out  # transaction markers: the type is the whole story
    msg = _parse(marker_type, payload, source)
    name = type(msg).__name__
    if marker_type == UPDATE:
        return {**out, "subscription": _text(msg.subscription_name, source, f"{name}.subscription_name"),
                "clusters": _clusters(msg.clusters, source, f"{name}.clusters")}
    out["snapshot_id"] = _text(msg.snapshot_id, source, f"{name}.snapshot_id")
    if marker_type == SNAPSHOT_REQUEST and msg.HasField("source_cluster"):
        out["source_cluster"] = _text(msg.source_cluster, source, f"{name}.source_cluster")
    elif marker_type == SNAPSHOT_RESPONSE:
        out["clusters"] = _clusters([msg.cluster] if msg.HasField("cluster") else [], source, f"{name}.cluster")
    elif marker_type == SNAPSHOT:
        local = msg.local_message_id if msg.HasField("local_message_id") else None
        out.update(clusters=_clusters(msg.clusters, source, f"{name}.clusters"),
                   local_ledger=None if local is None else local.ledger_id,
                   local_entry=None if local is None else local.entry_id)
    return out
