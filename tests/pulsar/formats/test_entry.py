"""Dump lines: the contract shape, header quirks, markers inside entries, publish-time vintages, bad lines."""
from __future__ import annotations

import base64
import json

import pytest

from audit.systems.pulsar.domain.positions import Position
from audit.errors import PayloadError
from audit.systems.pulsar.formats import markers
from audit.systems.pulsar.formats.entry import (EntryGap, EntryRecord, decode_dump_chunk, decode_entry_line,
                                        encode_entry_line, encode_gap_line)
from audit.systems.pulsar.formats.timefmt import format_time_ms, parse_time_ms

SRC = "raw/pulsar/east/topics/t/ns/x/dump/7/0-9.jsonl"
T0 = 1_709_287_200_123  # 2024-03-01T10:00:00.123Z


def line(**changes) -> bytes:
    doc = json.loads(encode_entry_line(7, 3, b"hello", producer_name="west-p1", sequence_id=12, publish_time_ms=T0,
                                       replicated_from="west", replicate_to=["east"],
                                       properties={"__MSG_PROP_REPL_SOURCE_POSITION": "5:7", "k": "v"}))
    for key, value in changes.items():
        if key == "headers":
            doc["headers"] = value(doc["headers"])
        else:
            doc[key] = value
    return json.dumps(doc).encode()


def test_encoded_line_is_the_contract_shape():
    doc = json.loads(encode_entry_line(7, 3, b"hello", producer_name="p", sequence_id=12, publish_time_ms=T0,
                                       replicated_from="west", replicate_to=["east", "south"],
                                       properties={"__MSG_PROP_REPL_SOURCE_POSITION": "5:7"}, marker_type=None))
    assert doc == {"ledger_id": 7, "entry_id": 3, "status": 200, "content_type": "application/octet-stream",
                   "headers": {"X-Pulsar-Message-ID": "7:3", "X-Pulsar-PROPERTY-__MSG_PROP_REPL_SOURCE_POSITION": "5:7",
                               "X-Pulsar-publish-time": "2024-03-01T10:00:00.123Z", "X-Pulsar-producer-name": "p",
                               "X-Pulsar-sequence-id": "12", "X-Pulsar-replicated-from": "west",
                               "X-Pulsar-replicated-to": ["east", "south"]},
                   "body_b64": base64.b64encode(b"hello").decode()}


def test_decode_replicated_data_message():
    rec = decode_entry_line(line(), SRC)
    assert rec == EntryRecord(7, 3, "west-p1", 12, T0, "west", ("east",),
                              {"__MSG_PROP_REPL_SOURCE_POSITION": "5:7", "k": "v"}, Position(5, 7), None, None, 5)


def test_lower_cased_headers_and_json_properties_header():
    def lower(h):
        out = {k.lower(): v for k, v in h.items() if "property" not in k.lower()}
        out["x-pulsar-property"] = json.dumps({"__MSG_PROP_REPL_SOURCE_POSITION": "9:1"})
        return out
    rec = decode_entry_line(line(headers=lower), SRC)
    assert (rec.producer_name, rec.replicate_to, rec.source_position) == ("west-p1", ("east",), Position(9, 1))


def test_marker_entry_decodes_its_body():
    body = markers.encode_snapshot_response("s-1", "east", 20, 4)
    rec = decode_entry_line(encode_entry_line(7, 4, body, producer_name="pulsar.marker", sequence_id=0,
                                              replicate_to=["west"], marker_type=11), SRC)
    assert rec.marker_type == 11 and rec.replicated_from is None and rec.source_position is None
    assert rec.marker["clusters"] == [{"cluster": "east", "ledger_id": 20, "entry_id": 4}]


def test_gap_lines():
    gaps = list(decode_dump_chunk(encode_gap_line(7, 5, 404, "404 Entry not found") +
                                  encode_gap_line(7, 6, 0, "timeout", None) +
                                  json.dumps({"ledger_id": 7, "entry_id": 7, "status": 200,
                                              "content_type": "text/html; charset=utf-8"}).encode(), SRC))
    assert gaps == [EntryGap(7, 5, 404, "404 Entry not found", "text/plain"), EntryGap(7, 6, 0, "timeout", None),
                    EntryGap(7, 7, 200, "HTML page instead of an entry", "text/html; charset=utf-8")]


def test_chunk_names_the_bad_line():
    data = encode_entry_line(7, 0) + b"\n" + encode_entry_line(7, 1)[:-20] + b"\n"
    it = decode_dump_chunk(data, SRC)
    assert next(it).entry_id == 0
    with pytest.raises(PayloadError) as e:
        next(it)
    assert e.value.source == SRC + ":line 3" and e.value.field == "<line>"


@pytest.mark.parametrize("changes, field, expected", [
    ({"headers": lambda h: {**h, "X-Pulsar-Message-ID": "7:4"}}, "headers.X-Pulsar-Message-ID", "'7:3'"),
    ({"headers": lambda h: {k: v for k, v in h.items() if k != "X-Pulsar-Message-ID"}},
     "headers.X-Pulsar-Message-ID", "'7:3'"),
    ({"headers": lambda h: {**h, "X-Pulsar-PROPERTY-__MSG_PROP_REPL_SOURCE_POSITION": "5:7:0"}},
     "headers.X-Pulsar-PROPERTY-__MSG_PROP_REPL_SOURCE_POSITION", "a position"),
    ({"headers": lambda h: {**h, "X-Pulsar-marker-type": "0"}}, "marker_type", "one of 10,11,12,13,20,21,22"),
    ({"headers": lambda h: {**h, "X-Pulsar-marker-type": "10"}}, "payload", "a ReplicatedSubscriptionsSnapshotRequest"),
    ({"headers": lambda h: {**h, "X-Pulsar-sequence-id": "twelve"}}, "headers.X-Pulsar-sequence-id", "an integer"),
    ({"headers": lambda h: {**h, "X-Pulsar-publish-time": "yesterday"}}, "headers.X-Pulsar-publish-time", "an ISO"),
    ({"headers": lambda h: {**h, "X-Pulsar-PROPERTY": "{not json"}}, "headers.X-Pulsar-PROPERTY", "a JSON object"),
    ({"headers": lambda h: {**h, "X-Pulsar-replicated-to": ["east", 3]}}, "headers.X-Pulsar-replicated-to", "a string"),
    ({"headers": lambda h: None}, "headers", "an object"),
    ({"body_b64": "not base64!"}, "body_b64", "the body as base64"),
    ({"entry_id": -1}, "entry_id", "an integer >= 0"),
    ({"ledger_id": "7"}, "ledger_id", "an integer >= 0"),
    ({"status": None}, "status", "an integer >= 0"),
])
def test_bad_lines(changes, field, expected):
    with pytest.raises(PayloadError) as e:
        decode_entry_line(line(**changes), SRC)
    assert (e.value.source, e.value.field) == (SRC, field) and e.value.expected.startswith(expected)


@pytest.mark.parametrize("text, ms", [
    ("2024-03-01T10:00:00.123Z", T0), ("2024-03-01T10:00:00Z", T0 - 123), ("2024-03-01T10:00:00.12Z", T0 - 3),
    ("2024-03-01T18:00:00.123+08:00", T0), ("2024-03-01T05:30:00.123-04:30", T0),
    ("2024-03-01T10:00:00.123456789Z", T0), ("2024-03-01 10:00:00.123", T0), ("2024-03-01 10:00:00.123+0000", T0),
    ("2024-03-01T10:00Z", T0 - 123), (str(T0), T0),
])
def test_publish_time_vintages(text, ms):
    assert parse_time_ms(text, SRC, "t") == ms


def test_format_time_like_the_broker():
    assert [format_time_ms(T0), format_time_ms(T0 - 3), format_time_ms(T0 - 123)] == [
        "2024-03-01T10:00:00.123Z", "2024-03-01T10:00:00.12Z", "2024-03-01T10:00:00Z"]


@pytest.mark.parametrize("text", ["2024-13-01T10:00:00Z", "2024-03-01", "", "2024-03-01T10:00:00+8"])
def test_bad_times(text):
    with pytest.raises(PayloadError):
        parse_time_ms(text, SRC, "t")
