"""KRaft record schemas (transcribed) and the frames around them.

Transcribed from Kafka's message schemas (docs/formats/kafka.md §6.2 names them and the commit read), not read at
run time:
- every metadata record (api key, valid versions, fields with their versions, nullable versions, tags and
  defaults); api keys 6, 13 and 16 are unassigned;
- a metadata record value (MetadataRecordSerde) is `frame version uvarint (= 1; 0 is the 2.8 preview, refused) |
  api key uvarint | version uvarint | message`, and nothing may follow the message;
- the raft control records (LeaderChangeMessage, SnapshotHeaderRecord, SnapshotFooterRecord, KRaftVersionRecord,
  VotersRecord): a control record's key is `{version int16, type int16}` and its value the message at version 0,
  with no frame.

Field names are the schemas' names in snake case. Secrets are not carried out of the decoder: ConfigRecord values
of non-topic resources (broker configs may be passwords; topic configs have no password type), the SCRAM salt and
keys, and delegation token ids read as "(redacted)", the kinds Kafka's own record redactor hides (§6.2)."""
from __future__ import annotations

import struct

from audit.errors import PayloadError
from audit.systems.kafka.formats.kraft_wire import (F, Array, Reader, Schema, Struct, decode_message, encode_struct,
                                            message_schema)
from audit.systems.kafka.formats.records import write_unsigned_varint

FRAME_VERSION = 1
REDACTED = "(redacted)"

_ENDPOINT = Struct("BrokerEndpoint", (F("name", "string"), F("host", "string"), F("port", "uint16"),
                                      F("security_protocol", "int16")))
_FEATURE = Struct("BrokerFeature", (F("name", "string"), F("min_supported_version", "int16"),
                                    F("max_supported_version", "int16")))
_NULL_INTS = dict(nullable="0+", tagged="0+", default=None)


METADATA: dict[int, Schema] = {s.key: s for s in (
    message_schema("RegisterBrokerRecord", 0, "0-3",
        F("broker_id", "int32"), F("is_migrating_zk_broker", "bool", "2+", default=False),
        F("incarnation_id", "uuid"), F("broker_epoch", "int64"), F("end_points", Array(_ENDPOINT)),
        F("features", Array(_FEATURE)), F("rack", "string", nullable="0+"),
        F("fenced", "bool", default=True), F("in_controlled_shutdown", "bool", "1+", default=False),
        F("log_dirs", Array("uuid"), "3+", tag=0, tagged="3+")),
    message_schema("UnregisterBrokerRecord", 1, "0", F("broker_id", "int32"), F("broker_epoch", "int64")),
    message_schema("TopicRecord", 2, "0", F("name", "string"), F("topic_id", "uuid")),
    message_schema("PartitionRecord", 3, "0-2",
        F("partition_id", "int32", default=-1), F("topic_id", "uuid"), F("replicas", Array("int32")),
        F("isr", Array("int32")), F("removing_replicas", Array("int32")),
        F("adding_replicas", Array("int32")), F("leader", "int32", default=-1),
        F("leader_recovery_state", "int8", tag=0, tagged="0+", default=0),
        F("leader_epoch", "int32", default=-1), F("partition_epoch", "int32", default=-1),
        F("directories", Array("uuid"), "1+"),
        F("eligible_leader_replicas", Array("int32"), "2+", nullable="2+", tag=1, tagged="2+", default=None),
        F("last_known_elr", Array("int32"), "2+", nullable="2+", tag=2, tagged="2+", default=None)),
    message_schema("ConfigRecord", 4, "0", F("resource_type", "int8"), F("resource_name", "string"),
        F("name", "string"), F("value", "string", nullable="0+")),
    message_schema("PartitionChangeRecord", 5, "0-2",
        F("partition_id", "int32", default=-1), F("topic_id", "uuid"),
        F("isr", Array("int32"), tag=0, **_NULL_INTS),
        F("leader", "int32", tag=1, tagged="0+", default=-2),
        F("replicas", Array("int32"), tag=2, **_NULL_INTS),
        F("removing_replicas", Array("int32"), tag=3, **_NULL_INTS),
        F("adding_replicas", Array("int32"), tag=4, **_NULL_INTS),
        F("leader_recovery_state", "int8", tag=5, tagged="0+", default=-1),
        F("directories", Array("uuid"), "1+", nullable="1+", tag=8, tagged="1+", default=None),
        F("eligible_leader_replicas", Array("int32"), "2+", nullable="2+", tag=6, tagged="2+", default=None),
        F("last_known_elr", Array("int32"), "2+", nullable="2+", tag=7, tagged="2+", default=None)),
    message_schema("FenceBrokerRecord", 7, "0", F("id", "int32"), F("epoch", "int64")),
    message_schema("UnfenceBrokerRecord", 8, "0", F("id", "int32"), F("epoch", "int64")),
    message_schema("RemoveTopicRecord", 9, "0", F("topic_id", "uuid")),
    message_schema("DelegationTokenRecord", 10, "0", F("owner", "string"), F("requester", "string"),
        F("renewers", Array("string")), F("issue_timestamp", "int64"), F("max_timestamp", "int64"),
        F("expiration_timestamp", "int64"), F("token_id", "string")),
    message_schema("UserScramCredentialRecord", 11, "0", F("name", "string"), F("mechanism", "int8"),
        F("salt", "bytes"), F("stored_key", "bytes"), F("server_key", "bytes"), F("iterations", "int32")),
    message_schema("FeatureLevelRecord", 12, "0", F("name", "string"), F("feature_level", "int16")),
    message_schema("ClientQuotaRecord", 14, "0",
        F("entity", Array(Struct("EntityData", (F("entity_type", "string"),
                                                F("entity_name", "string", nullable="0+"))))),
        F("key", "string"), F("value", "float64"), F("remove", "bool")),
    message_schema("ProducerIdsRecord", 15, "0", F("broker_id", "int32"), F("broker_epoch", "int64", default=-1),
        F("next_producer_id", "int64")),
    message_schema("BrokerRegistrationChangeRecord", 17, "0-2", F("broker_id", "int32"), F("broker_epoch", "int64"),
        F("fenced", "int8", tag=0, tagged="0+"), F("in_controlled_shutdown", "int8", "1+", tag=1, tagged="1+"),
        F("log_dirs", Array("uuid"), "2+", tag=2, tagged="2+")),
    message_schema("AccessControlEntryRecord", 18, "0", F("id", "uuid"), F("resource_type", "int8"),
        F("resource_name", "string"), F("pattern_type", "int8"), F("principal", "string"),
        F("host", "string"), F("operation", "int8"), F("permission_type", "int8")),
    message_schema("RemoveAccessControlEntryRecord", 19, "0", F("id", "uuid")),
    message_schema("NoOpRecord", 20, "0"),
    message_schema("ZkMigrationStateRecord", 21, "0", F("zk_migration_state", "int8")),
    message_schema("RemoveUserScramCredentialRecord", 22, "0", F("name", "string"), F("mechanism", "int8")),
    message_schema("BeginTransactionRecord", 23, "0",
        F("name", "string", nullable="0+", tag=0, tagged="0+", default=None)),
    message_schema("EndTransactionRecord", 24, "0"),
    message_schema("AbortTransactionRecord", 25, "0",
        F("reason", "string", nullable="0+", tag=0, tagged="0+", default=None)),
    message_schema("RemoveDelegationTokenRecord", 26, "0", F("token_id", "string")),
    message_schema("RegisterControllerRecord", 27, "0", F("controller_id", "int32"), F("incarnation_id", "uuid"),
        F("zk_migration_ready", "bool"),
        F("end_points", Array(Struct("ControllerEndpoint", _ENDPOINT.fields))),
        F("features", Array(Struct("ControllerFeature", _FEATURE.fields)))),
)}
BY_NAME: dict[str, Schema] = {s.name: s for s in METADATA.values()}
# Which fields leave the decoder as REDACTED (see the module doc); ConfigRecord's value is decided per record.
_SECRET = {"UserScramCredentialRecord": ("salt", "stored_key", "server_key"),
           "DelegationTokenRecord": ("token_id",), "RemoveDelegationTokenRecord": ("token_id",)}
_TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC

# ControlRecordType ids -> the schema of the value (None: named only; ABORT/COMMIT are transaction markers).
_VOTER = Struct("Voter", (F("voter_id", "int32"), F("voter_directory_id", "uuid", "1+")))
_VOTERS = Struct("Voter", (
    F("voter_id", "int32"), F("voter_directory_id", "uuid"),
    F("endpoints", Array(Struct("Endpoint", (F("name", "string"), F("host", "string"), F("port", "uint16"))))),
    F("kraft_version_feature", Struct("KRaftVersionFeature", (F("min_supported_version", "int16"),
                                                              F("max_supported_version", "int16"))))))
CONTROL: dict[int, tuple[str, Schema | None]] = {
    0: ("ABORT", None), 1: ("COMMIT", None),
    2: ("LEADER_CHANGE", message_schema("LeaderChangeMessage", 2, "0-1", F("version", "int16"),
                                        F("leader_id", "int32"), F("voters", Array(_VOTER)),
                                        F("granting_voters", Array(_VOTER)))),
    3: ("SNAPSHOT_HEADER", message_schema("SnapshotHeaderRecord", 3, "0", F("version", "int16"),
                                          F("last_contained_log_timestamp", "int64"))),
    4: ("SNAPSHOT_FOOTER", message_schema("SnapshotFooterRecord", 4, "0", F("version", "int16"))),
    5: ("KRAFT_VERSION", message_schema("KRaftVersionRecord", 5, "0", F("version", "int16"),
                                        F("kraft_version", "int16"))),
    6: ("KRAFT_VOTERS", message_schema("VotersRecord", 6, "0", F("version", "int16"), F("voters", Array(_VOTERS)))),
}
CONTROL_VALUE_VERSION = 0  # ControlRecordUtils.*_CURRENT_VERSION: every control value is read at version 0


class UnknownRecordType(PayloadError):
    """An api key no schema here knows: the record is reported and skipped, the rest of the log still reads."""


def _redact(schema: Schema, fields: dict) -> dict:
    secret = _SECRET.get(schema.name, ())
    if schema.name == "ConfigRecord" and fields["resource_type"] != _TOPIC_RESOURCE and fields["value"] is not None:
        secret = ("value",)
    return {k: (REDACTED if k in secret else v) for k, v in fields.items()}


def decode_metadata_value(value: bytes, source: str, where: str) -> tuple[Schema, int, dict]:
    """(schema, version, fields) of one metadata record value (AbstractApiMessageSerde.read).
    UnknownRecordType for an api key without a schema; PayloadError for everything else that is wrong."""
    inp = Reader(value, 0, len(value), source)
    frame = inp.uvarint(f"{where}.frame_version")
    if frame != FRAME_VERSION:
        raise PayloadError(source, f"{where}.frame_version", f"frame version {FRAME_VERSION} (0 is the 2.8 "
                           "preview format, which later versions refuse)", frame)
    api_key = inp.uvarint(f"{where}.api_key")
    version = inp.uvarint(f"{where}.version")
    schema = METADATA.get(api_key)
    if schema is None:
        raise UnknownRecordType(source, f"{where}.api_key", "a metadata record type with a known schema "
                                f"({min(METADATA)}..{max(METADATA)})", api_key)
    return schema, version, _redact(schema, decode_message(schema, version, value, inp.pos, len(value),
                                                           source, where))


def decode_control_value(control_type: int, value: bytes, source: str, where: str) -> tuple[str, str, dict]:
    """(ControlRecordType name, message name, fields) of a control record; types without a schema here
    (ABORT, COMMIT, unknown) come back named with no fields."""
    name, schema = CONTROL.get(control_type, ("UNKNOWN", None))
    if schema is None:
        return name, name, {}
    return name, schema.name, decode_message(schema, CONTROL_VALUE_VERSION, value, 0, len(value), source, where)


def encode_metadata_value(record_type: str, version: int, fields: dict) -> bytes:
    """AbstractApiMessageSerde.write: frame version 1, api key, version, then the message."""
    schema = BY_NAME[record_type]
    if not schema.versions[0] <= version <= schema.versions[1]:
        raise ValueError(f"{record_type} has versions {schema.versions}, not {version}")
    return (write_unsigned_varint(FRAME_VERSION) + write_unsigned_varint(schema.key)
            + write_unsigned_varint(version) + encode_struct(schema.fields, version, fields, record_type))


def encode_control(kind: str, fields: dict) -> tuple[bytes, bytes]:
    """(key, value) of a raft control record (ControlRecordType name, e.g. "LEADER_CHANGE") at version 0."""
    for code, (name, schema) in CONTROL.items():
        if name == kind and schema is not None:
            return struct.pack(">hh", 0, code), encode_struct(schema.fields, CONTROL_VALUE_VERSION, fields, kind)
    raise ValueError(f"no control record schema named {kind!r}")
