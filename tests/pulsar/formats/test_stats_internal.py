"""stats-internal decoding: every vintage of docs/formats/pulsar.md §2.1, the real fixtures, and bad input."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.domain.rangeset import parse_individually_deleted
from audit.errors import PayloadError
from audit.systems.pulsar.formats.stats_internal import (LedgerInfo, cursor_stats, decode_stats_internal,
                                                 stats_internal_to_json)

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
SRC = "raw/pulsar/east/topics/t/ns/x/stats-internal.json"

# The 2016 docs sample (apache/pulsar-site admin docs, "persistent stats-internal"): null failure timestamp,
# space-separated timestamps, U+2025 ranges with a trailing ", ]", no cursor properties.
VINTAGE_2016 = """{"entriesAddedCounter": 20449518, "numberOfEntries": 3233, "totalSize": 331482,
 "currentLedgerEntries": 3233, "currentLedgerSize": 331482, "lastLedgerCreatedTimestamp": "2016-06-29 03:00:23.825",
 "lastLedgerCreationFailureTimestamp": null, "waitingCursorsCount": 1, "pendingAddEntriesCount": 0,
 "lastConfirmedEntry": "324711539:3232", "state": "LedgerOpened",
 "ledgers": [{"ledgerId": 324711539, "entries": 0, "size": 0}],
 "cursors": {"my-subscription": {"markDeletePosition": "324711539:3133", "readPosition": "324711539:3233",
   "waitingReadOp": true, "pendingReadOps": 0, "messagesConsumedCounter": 20449501, "cursorLedger": 324702104,
   "cursorLedgerLastEntry": 21,
   "individuallyDeletedMessages": "[(324711539:3134\u2025324711539:3136], (324711539:3137\u2025324711539:3140], ]",
   "lastLedgerSwitchTimestamp": "2016-06-29 01:30:19.313", "state": "Open"}}}"""


def modern(**cursors) -> dict:
    return {"entriesAddedCounter": 5, "numberOfEntries": 12, "totalSize": 900, "currentLedgerEntries": 0,
            "currentLedgerSize": 0, "lastLedgerCreatedTimestamp": "2024-03-01T10:00:00Z", "waitingCursorsCount": 0,
            "pendingAddEntriesCount": 0, "lastConfirmedEntry": "8:-1", "state": "LedgerOpened",
            "ledgers": [{"ledgerId": 5, "entries": 12, "size": 900, "offloaded": False, "underReplicated": False},
                        {"ledgerId": 8, "entries": 0, "size": 0, "offloaded": False, "underReplicated": False}],
            "cursors": cursors, "schemaLedgers": [], "compactedLedger": {"ledgerId": -1, "entries": -1, "size": -1},
            "brandNewKey": 1}


def cur(mdp: str, rp: str = "8:0", ranges: str = "[]", **props) -> dict:
    return {"markDeletePosition": mdp, "readPosition": rp, "individuallyDeletedMessages": ranges, "state": "Open",
            "messagesConsumedCounter": 3, "active": False, "properties": props}


def enc(doc) -> bytes:
    return json.dumps(doc).encode()


def test_vintage_2016():
    si = decode_stats_internal(VINTAGE_2016.encode(), SRC)
    assert si.last_confirmed_entry == Position(324711539, 3232)
    assert si.last_ledger_created == "2016-06-29 03:00:23.825"
    assert si.ledgers == (LedgerInfo(324711539, 0, 0),) and si.open_ledger_id == 324711539
    c = si.cursors["my-subscription"]
    assert (c.mark_delete, c.read_position, c.state, c.active) == (
        Position(324711539, 3133), Position(324711539, 3233), "Open", None)
    assert c.individually_deleted.to_string() == "[(324711539:3134..324711539:3136],(324711539:3137..324711539:3140]]"
    assert dict(c.properties) == {} and c.kind == "subscription" and not c.replicated
    assert si.extra_keys == ()


def test_modern_with_special_cursors_and_unknown_keys():
    doc = modern(**{"pulsar.repl.west": cur("5:11"), "pulsar.dedup": cur("5:3"), "__compaction": cur("5:-1"),
                    "orders-sub": cur("5:7", ranges="[(5:8..5:10]]", **{"pulsar.replicated.subscription": 1}),
                    "plain": cur("8:-1", **{"pulsar.replicated.subscription": 0})})
    si = decode_stats_internal(enc(doc), SRC)
    assert si.last_confirmed_entry == Position(8, -1) and si.open_ledger_id == 8
    got = {n: (c.kind, c.remote_cluster, c.replicated) for n, c in si.cursors.items()}
    assert got == {"pulsar.repl.west": ("replicator", "west", False), "pulsar.dedup": ("dedup", None, False),
                   "__compaction": ("compaction", None, False), "orders-sub": ("subscription", None, True),
                   "plain": ("subscription", None, False)}
    assert si.extra_keys == ("brandNewKey",)
    out = stats_internal_to_json(si)
    assert out["cursors"]["orders-sub"]["individually_deleted"] == [["5:8", "5:10"]]
    assert [lg["is_open"] for lg in out["ledgers"]] == [False, True]
    json.dumps(out)


def test_closed_ledger_state_has_no_open_ledger():
    doc = modern()
    doc["state"] = "ClosedLedger"
    assert decode_stats_internal(enc(doc), SRC).open_ledger_id is None


def test_real_01_transaction_log_wrapper():
    si = decode_stats_internal((REAL / "pulsar-stats-internal-01.json").read_bytes(), "01")
    assert si.extra_keys == ("transactionLogStats",)
    assert (si.last_confirmed_entry, si.current_ledger_entries, si.open_ledger_id) == (Position(13, 2), 3, 13)
    assert si.ledgers[0].metadata.startswith("LedgerMetadata{formatVersion=3") and si.ledgers[0].offloaded is False
    c = si.cursors["transaction.subscription"]
    assert (c.mark_delete, c.read_position, c.messages_consumed, len(c.individually_deleted)) == (
        Position(13, 2), Position(13, 3), 3, 0)


def test_real_02_pending_ack_with_sentinel_mark_delete():
    si = decode_stats_internal((REAL / "pulsar-stats-internal-02.json").read_bytes(), "02")
    assert si.extra_keys == ("pendingAckLogStats",)
    assert [(lg.ledger_id, lg.entries) for lg in si.ledgers] == [(56, 2195), (64, 0)]
    assert (si.number_of_entries, si.current_ledger_entries, si.pending_add_entries) == (2247, 104, 52)
    assert si.cursors["__pending_ack_state"].mark_delete == Position(56, -1)


def test_real_04_first_fragment_is_truncated_then_completes():
    text = (REAL / "pulsar-stats-internal-04.fragment.txt").read_text()
    first = text.split("```json", 1)[1].split("[... gap", 1)[0].rstrip()
    with pytest.raises(PayloadError) as e:
        decode_stats_internal(first.encode(), "04")
    assert e.value.field == "<root>" and "complete JSON" in e.value.expected
    completed = first[: first.rindex('"underRepli')] + '"underReplicated" : false } ], "cursors" : { } }'
    si = decode_stats_internal(completed.encode(), "04")
    closed = sum(lg.entries for lg in si.ledgers if lg.ledger_id != si.open_ledger_id)
    assert (closed, si.current_ledger_entries, si.number_of_entries) == (2088, 48, 2136)
    assert si.last_confirmed_entry == Position(2043525, 47) and si.open_ledger_id == 2043525
    assert si.last_ledger_created == "2025-01-31T09:37:46.472Z"


def test_real_04_second_fragment_ranges_as_a_cursor():
    text = (REAL / "pulsar-stats-internal-04.fragment.txt").read_text()
    tail = "".join(text.split("```json")[2].split())  # the thread wrapped one range over two lines
    complete = tail[tail.index("("): tail.rindex("]") + 1]  # cut-off at both ends: keep whole ranges
    c = cursor_stats("sub", {"markDeletePosition": "1739559:3274", "individuallyDeletedMessages": f"[{complete}]"},
                     "04")
    assert len(c.individually_deleted) == complete.count("(") == 45  # no two touch: every gap is a hole
    assert c.individually_deleted.ranges[0] == (Position(1739559, 3274), Position(1739559, 3276))
    assert Position(1739559, 3277) not in c.individually_deleted  # a hole between (..3276] and (3277..]
    assert c.individually_deleted == parse_individually_deleted(f"[{complete}]", "04")


def test_real_05_fragment_cursor():
    text = (REAL / "pulsar-stats-vs-internal-05.fragment.txt").read_text()
    frag = text.split("stats-internal:", 1)[1].strip()
    doc = json.loads("{" + frag + "}}")  # published with its closing braces cut off
    c = cursor_stats("sub-1", doc["sub-1"], "05")
    assert (c.mark_delete, c.read_position, c.messages_consumed) == (Position(546417, 690), Position(546417, 691),
                                                                      127360)


def test_real_08_in_a_shell_transcript():
    text = (REAL / "pulsar-stats-internal-08.txt").read_text()
    body = re.search(r"^\{.*?^\}", text, re.S | re.M).group(0)
    si = decode_stats_internal(body.encode(), "08")
    assert (si.last_confirmed_entry, si.ledgers, dict(si.cursors)) == (Position(0, 8), (LedgerInfo(0, 0, 0, False),),
                                                                        {})
    assert si.open_ledger_id == 0 and si.current_ledger_entries == 9


def test_failure_timestamp_null_absent_or_set():
    for value in (None, "2025-01-31T09:37:46.34Z"):
        doc = modern()
        doc["lastLedgerCreationFailureTimestamp"] = value
        decode_stats_internal(enc(doc), SRC)


@pytest.mark.parametrize("mutate, field, expected", [
    (lambda d: d.pop("cursors"), "cursors", "an object of cursor name -> cursor stats"),
    (lambda d: d.update(cursors=[]), "cursors", "an object of cursor name -> cursor stats"),
    (lambda d: d.update(lastConfirmedEntry="8:0:1"), "lastConfirmedEntry", "a position"),
    (lambda d: d.pop("lastConfirmedEntry"), "lastConfirmedEntry", "a position"),
    (lambda d: d["cursors"].update({"sub-a": cur("5")}), "cursors.sub-a.markDeletePosition", "a position"),
    (lambda d: d["cursors"].update({"sub-a": cur("5:1", rp="x")}), "cursors.sub-a.readPosition", "a position"),
    (lambda d: d["cursors"].update({"sub-a": cur("5:1", ranges="[(5:3..5:2]]")}),
     "cursors.sub-a.individuallyDeletedMessages", "lower < upper"),
    (lambda d: d["cursors"].update({"sub-a": cur("5:1", ranges="[(5:3-5:4]]")}),
     "cursors.sub-a.individuallyDeletedMessages", "a range"),
    (lambda d: d["cursors"].update({"sub-a": cur("5:1", x="1")}), "cursors.sub-a.properties.x", "an integer"),
    (lambda d: d["ledgers"][1].pop("entries"), "ledgers[1].entries", "an integer"),
    (lambda d: d.update(numberOfEntries="12"), "numberOfEntries", "an integer"),
    (lambda d: d.update(ledgers={}), "ledgers", "a list"),
])
def test_bad_fields_name_source_and_field(mutate, field, expected):
    doc = modern(**{"ok": cur("5:1")})
    mutate(doc)
    with pytest.raises(PayloadError) as e:
        decode_stats_internal(enc(doc), SRC)
    assert (e.value.source, e.value.field) == (SRC, field) and e.value.expected.startswith(expected)


@pytest.mark.parametrize("data, expected", [
    (b'{"lastConfirmedEntry": "1:2", "cursors": {', "a complete JSON document"),
    (b"[1, 2]", "a JSON object"),
    (b"", "a complete JSON document"),
    (b"\n<html><head><title>502 Bad Gateway</title></head></html>",
     "a JSON object (got an HTML page: 502 Bad Gateway)"),
])
def test_not_a_stats_internal_object(data, expected):
    with pytest.raises(PayloadError) as e:
        decode_stats_internal(data, SRC)
    assert (e.value.source, e.value.field, e.value.expected[: len(expected)]) == (SRC, "<root>", expected)
