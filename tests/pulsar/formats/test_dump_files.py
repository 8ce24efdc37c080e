"""Dump lines as old brokers send them (before apache/pulsar#11443), whole dump chunks and the dump window
(`dump.json`), decoded strictly as `replaudit import` does."""
from __future__ import annotations

import base64
import json

import pytest

from audit.errors import PayloadError
from audit.systems.pulsar.formats.dump_chunk import decode_chunk_file
from audit.systems.pulsar.formats.dump_window import decode_dump_window
from audit.systems.pulsar.formats.entry import decode_entry_line, encode_entry_line, encode_gap_line
from audit.systems.pulsar.formats import markers

T0 = 1_709_287_200_123


def _old(ledger: int, entry: int, body: bytes, **extra) -> bytes:
    """What generateResponseWithEntry sent before #11443: id, properties, times, batch count."""
    headers = {"X-Pulsar-Message-ID": f"{ledger}:{entry}", "X-Pulsar-publish-time": "2024-03-01T10:00:00.123Z",
               "X-Pulsar-num-batch-message": "1", **extra}
    return json.dumps({"ledger_id": ledger, "entry_id": entry, "status": 200, "content_type": "application/"
                       "octet-stream", "headers": headers, "body_b64": base64.b64encode(body).decode()}).encode()


@pytest.mark.parametrize("line, exposed", [
    (_old(7, 0, b"data"), False),
    # a marker and a replicated copy look exactly like a message on an old broker
    (_old(7, 1, markers.encode_snapshot_request("s-1", "west")), False),
    (_old(7, 2, b"copy", **{"X-Pulsar-PROPERTY-k": "v"}), False),
    (encode_entry_line(7, 3, b"m", producer_name="p", sequence_id=1, publish_time_ms=T0), True),
    (encode_entry_line(7, 4, markers.encode_snapshot_request("s-1", "west"), marker_type=10), True),
    (encode_entry_line(7, 5, b"c", replicated_from="west"), True),
    # proxies and HTTP/2 lower-case header names
    (encode_entry_line(7, 6, b"m", extra_headers={"x-pulsar-sequence-id": "3"}), True),
])
def test_metadata_headers_tell_an_old_broker(line, exposed):
    rec = decode_entry_line(line, "k")
    assert rec.metadata_headers is exposed
    if not exposed:
        assert rec.marker_type is None and rec.replicated_from is None and rec.producer_name is None


def test_a_chunk_holds_each_position_of_its_key_once():
    good = encode_entry_line(12, 0, b"a", producer_name="p", sequence_id=0) + encode_gap_line(12, 1, 500, "x")
    assert [r.entry_id for r in decode_chunk_file(good, "c", "12/0-1.jsonl")] == [0, 1]
    for name, data, field in [
        ("12/1-0.jsonl", good, "key"), ("x/0-1.jsonl", good, "key"), ("12/0-2.jsonl", good, "<lines>"),
        ("12/0-1.jsonl", good + encode_gap_line(12, 1, 404, "y"), "entry_id"),
        ("12/0-0.jsonl", encode_gap_line(13, 0, 404, "y"), "ledger_id/entry_id"),
        ("12/0-0.jsonl", b'{"ledger_id": 12}', "entry_id"),
    ]:
        with pytest.raises(PayloadError) as e:
            decode_chunk_file(data, "c", name)
        assert e.value.field == field, (name, str(e.value))


WINDOW = {"topic": "persistent://t/ns/x", "from": "5:1", "to": "8:2", "ledgers": [{"ledger_id": 8, "entries": 3}],
          "entries_expected": 3, "entries_read": 3, "entries_failed": 0, "complete": True, "reason": None}


def test_dump_window():
    w = decode_dump_window(json.dumps(WINDOW).encode(), "d", "persistent://t/ns/x")
    assert (str(w.start), str(w.end), w.complete, w.ledgers) == ("5:1", "8:2", True, ((8, 3),))
    for change, field in [({"topic": "persistent://t/ns/y"}, "topic"), ({"from": "5"}, "from"),
                          ({"complete": "yes"}, "complete"), ({"entries_read": 2}, "complete"),
                          ({"entries_failed": -1}, "entries_failed"), ({"ledgers": {}}, "ledgers"),
                          ({"ledgers": [{"entries": 1}]}, "ledgers[0].ledger_id"), ({"reason": 3}, "reason")]:
        with pytest.raises(PayloadError) as e:
            decode_dump_window(json.dumps({**WINDOW, **change}).encode(), "d", "persistent://t/ns/x")
        assert e.value.field == field, (change, str(e.value))
