"""GetListOfEntriesOfLedger collection against a protocol-level fake bookie
(lab/bookkeeper/bookie_server.py ScriptedBookie)."""
from __future__ import annotations

import json
import time

import pytest

from audit.collectors.base import DirSink
from audit.systems.bookkeeper.collect.bookie_client import (BookieAddressError, BookieClientConfig, bookie_address,
                                                       collect_entries_of_ledgers)
from audit.systems.bookkeeper.formats import availability, protocol
from lab.loopback import unused_loopback_port
from lab.bookkeeper.bookie_server import ScriptedBookie

FAST = BookieClientConfig(connect_timeout_s=2.0, request_timeout_s=0.5, window=100, reconnects=1,
                          list_probe_timeout_s=0.2)


def _files(root, bookie: str) -> dict[str, bytes]:
    d = root / "entries-of-ledger" / bookie
    return {p.name: p.read_bytes() for p in d.iterdir()} if d.exists() else {}


def _error(root, bookie: str, ledger_id: int) -> dict:
    return json.loads((root / "entries-of-ledger" / bookie / f"{ledger_id}.error.json").read_text())


def test_answers_are_stored_exactly_as_received_and_matched_by_txn_id(tmp_path):
    entries = {1: [0, 1, 2, 5, 6], 2: list(range(100)), 7: [3]}
    # Ledger 1 goes alone (the capability probe); the other three come back as one batch, in reverse order.
    with ScriptedBookie(entries, answer_in_batches_of=3) as bk:
        report = collect_entries_of_ledgers({bk.bookie_id: [1, 2, 7, 9]}, DirSink(tmp_path), config=FAST,
                                            cluster="bk-a")
    files = _files(tmp_path, bk.bookie_id)
    assert set(files) == {"1.pb", "2.pb", "7.pb", "9.pb"}
    txn_of = {lid: txn for _, lid, txn in bk.requests}
    for lid in (1, 2, 7):
        # Byte-exact: the fake's answer for that txnId, answered out of order.
        assert files[f"{lid}.pb"] == bk.answer_body(txn_of[lid], lid)
        answer = protocol.decode_response(files[f"{lid}.pb"], "t")
        assert (answer.status, answer.ledger_id) == ("EOK", lid)
        assert list(availability.iter_entries(availability.decode(answer.availability, "t"))) == entries[lid]
    assert protocol.decode_response(files["9.pb"], "t").status == "ENOLEDGER"
    assert bk.connections == 1  # all four requests pipelined on one connection
    assert report.gaps == []
    assert report.counts["entries_of_ledger_answered"] == 4
    assert report.counts["entries_of_ledger_status_ENOLEDGER"] == 1


def test_pipelining_with_a_small_window_covers_many_ledgers(tmp_path):
    entries = {lid: range(lid % 7 + 1) for lid in range(1, 301)}
    cfg = BookieClientConfig(connect_timeout_s=2.0, request_timeout_s=5.0, window=8)
    with ScriptedBookie(entries) as bk:
        report = collect_entries_of_ledgers({bk.bookie_id: list(entries)}, DirSink(tmp_path), config=cfg)
    assert len(_files(tmp_path, bk.bookie_id)) == 300
    assert report.counts["entries_of_ledger_status_EOK"] == 300
    assert report.gaps == []


def test_refused_connection_is_unreachable_for_every_ledger_not_empty(tmp_path):
    bookie = f"127.0.0.1:{unused_loopback_port()}"
    report = collect_entries_of_ledgers({bookie: [4, 5]}, DirSink(tmp_path), config=FAST)
    assert set(_files(tmp_path, bookie)) == {"4.error.json", "5.error.json"}
    assert _error(tmp_path, bookie, 4)["error"] == "unreachable"
    assert len(report.gaps) == 1
    gap = report.gaps[0]
    assert gap.source == f"bookie://{bookie}" and gap.error.startswith("unreachable")
    assert "2 ledgers" in gap.what


def test_silent_bookie_times_out_within_the_request_timeout(tmp_path):
    with ScriptedBookie(mode="silent") as bk:
        start = time.monotonic()
        report = collect_entries_of_ledgers({bk.bookie_id: [1, 2, 3]}, DirSink(tmp_path), config=FAST)
        elapsed = time.monotonic() - start
    # One timeout per connection (1 + 1 reconnect), not one per ledger.
    assert elapsed < 4 * FAST.request_timeout_s
    assert {_error(tmp_path, bk.bookie_id, lid)["error"] for lid in (1, 2, 3)} == {"timeout"}
    assert [g.error.split(":")[0] for g in report.gaps] == ["timeout"]
    assert not any(name.endswith(".pb") for name in _files(tmp_path, bk.bookie_id))


def test_one_unanswered_ledger_times_out_while_the_others_are_stored(tmp_path):
    with ScriptedBookie({1: [0], 2: [0, 1], 3: [0]}, silent_ledgers=[2]) as bk:
        report = collect_entries_of_ledgers({bk.bookie_id: [1, 2, 3]}, DirSink(tmp_path), config=FAST)
    assert set(_files(tmp_path, bk.bookie_id)) == {"1.pb", "2.error.json", "3.pb"}
    assert _error(tmp_path, bk.bookie_id, 2)["error"] == "timeout"
    assert len(report.gaps) == 1 and "1 ledgers: 2)" in report.gaps[0].what


def test_closed_connection_reconnects_once_then_gives_up(tmp_path):
    cfg = BookieClientConfig(connect_timeout_s=2.0, request_timeout_s=5.0, window=1, reconnects=1)
    with ScriptedBookie({1: [0]}, mode="close") as bk:
        report = collect_entries_of_ledgers({bk.bookie_id: [1, 2, 3]}, DirSink(tmp_path), config=cfg)
    assert bk.connections == 2
    assert [lid for _, lid, _ in bk.requests] == [1, 2]
    errors = {lid: _error(tmp_path, bk.bookie_id, lid) for lid in (1, 2, 3)}
    assert {e["error"] for e in errors.values()} == {"connection_closed"}
    assert errors[3]["message"].startswith("not asked after 2 failed connection(s)")
    assert report.counts["entries_of_ledger_errors"] == 3


def test_address_override_and_custom_bookie_ids(tmp_path):
    with ScriptedBookie({5: [0, 1]}) as bk:
        report = collect_entries_of_ledgers({"bookie-a": [5], "bookie-b": [5]}, DirSink(tmp_path), config=FAST,
                                            addresses={"bookie-a": bk.bookie_id})
    assert set(_files(tmp_path, "bookie-a")) == {"5.pb"}
    assert _error(tmp_path, "bookie-b", 5)["error"] == "unreachable"
    assert "bookie_addresses" in _error(tmp_path, "bookie-b", 5)["message"]
    assert [g.source for g in report.gaps] == ["bookie://bookie-b"]


def test_bookie_address_parsing():
    assert bookie_address("bk1:3181") == ("bk1", 3181)
    assert bookie_address("[::1]:3181") == ("::1", 3181)
    assert bookie_address("x", {"x": "10.0.0.1:3181"}) == ("10.0.0.1", 3181)
    for bad in ("bk1", "bk1:", ":3181", "bk1:99999", "bk1:abc"):
        with pytest.raises(BookieAddressError):
            bookie_address(bad)


def test_undecodable_answer_is_a_protocol_error_not_stored(tmp_path):
    cfg = BookieClientConfig(connect_timeout_s=2.0, request_timeout_s=5.0, window=10, reconnects=0)
    with ScriptedBookie(mode="garbage") as bk:
        report = collect_entries_of_ledgers({bk.bookie_id: [1, 2]}, DirSink(tmp_path), config=cfg)
    assert set(_files(tmp_path, bk.bookie_id)) == {"1.error.json", "2.error.json"}
    assert {_error(tmp_path, bk.bookie_id, lid)["error"] for lid in (1, 2)} == {"protocol_error"}
    assert report.gaps[0].error.startswith("protocol_error")


# -- capability probe: bookies that never answer GetListOfEntriesOfLedger (DbLedgerStorage, apache/bookkeeper#2078)
def test_bookie_without_the_listing_is_detected_by_a_read_and_not_asked_again(tmp_path):
    handed = []

    async def probe(bookie, ledger_ids, reason):
        handed.append((bookie, ledger_ids, reason))
        from audit.collectors.base import CollectionReport
        report = CollectionReport("bookkeeper", "bk-a")
        report.count("probed_by_test")
        return report

    with ScriptedBookie({1: [0, 1], 2: [0]}, mode="no_list") as bk:
        report = collect_entries_of_ledgers({bk.bookie_id: [3, 1, 2]}, DirSink(tmp_path), config=FAST,
                                            cluster="bk-a", probe_unsupported=probe)
    # One listing (the probe), one read of entry 0 of the same ledger, nothing more.
    assert [lid for _, lid, _ in bk.requests] == [1]
    assert [(lid, e) for _, lid, e, _ in bk.reads] == [(1, 0)]
    assert [(b, ids) for b, ids, _ in handed] == [(bk.bookie_id, [1, 2, 3])]
    assert "unanswered within 0.2 s while a ReadRequest was answered (EOK)" in handed[0][2]
    assert report.counts["bookies_list_unsupported"] == 1
    assert report.counts["entries_of_ledger_unsupported"] == 3
    assert report.counts["probed_by_test"] == 1
    assert report.gaps == [] and _files(tmp_path, bk.bookie_id) == {}


def test_without_a_prober_unsupported_ledgers_are_errors_not_empty(tmp_path):
    with ScriptedBookie({}, mode="no_list") as bk:
        report = collect_entries_of_ledgers({bk.bookie_id: [4, 5]}, DirSink(tmp_path), config=FAST)
    assert bk.reads[0][1:3] == (4, 0)  # ENOLEDGER is an answer too: the bookie is alive
    assert {_error(tmp_path, bk.bookie_id, lid)["error"] for lid in (4, 5)} == {"list_unsupported"}
    assert report.gaps[0].error.startswith("list_unsupported: GetListOfEntriesOfLedger unanswered")


def test_listing_bookie_gets_no_reads_and_silent_bookie_stays_a_timeout(tmp_path):
    with ScriptedBookie({1: [0], 2: [0]}) as answering, ScriptedBookie(mode="silent") as silent:
        report = collect_entries_of_ledgers({answering.bookie_id: [1, 2], silent.bookie_id: [1, 2]},
                                            DirSink(tmp_path), config=FAST)
    assert answering.reads == [] and len(answering.requests) == 2
    assert set(_files(tmp_path, answering.bookie_id)) == {"1.pb", "2.pb"}
    assert {_error(tmp_path, silent.bookie_id, lid)["error"] for lid in (1, 2)} == {"timeout"}
    # Each connection (1 + 1 reconnect) probes its first ledger: a listing, then a read, neither answered.
    assert [lid for _, lid, _ in silent.requests] == [1, 2] and [r[1] for r in silent.reads] == [1, 2]
    assert "bookies_list_unsupported" not in report.counts
