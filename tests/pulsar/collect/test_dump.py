"""The dump part of PulsarCollector: moving topics, resume, concurrency bound, cap, reader complement."""
import base64
import itertools
import json

import pytest

from audit.collectors.base import DirSink
from audit.systems.pulsar.collect.collector import PulsarCollector
from audit.systems.pulsar.collect.reader import ReaderEntry
from audit.systems.pulsar.config import PulsarDump
from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.formats.stats_internal import decode_stats_internal
from tests.pulsar.collect.test_collector import (ORDERS, ORDERS_ENTRY, WHAT, expected_line, fake, files,  # noqa: F401
                                                    run)
from lab.pulsar.admin_server import TOPIC_NOT_FOUND, Answer, ScriptedTopic, plain_entry
from tests.pulsar.collect.recorded import ORDERS_WINDOW, real_body


def test_topic_unloaded_mid_dump_is_retried_with_backoff(fake, tmp_path):
    fake.script(r"/orders/ledger/", [TOPIC_NOT_FOUND] * 3)
    sleeps = []
    collector = PulsarCollector(sleep=sleeps.append, retry_attempts=5, retry_base_delay_s=0.5)
    report = run(fake, tmp_path, collector=collector, namespaces=(), topics=("persistent://acme/orders/orders",),
                 dump=PulsarDump(concurrency=1, chunk_entries=2, max_entries_per_topic=1000))
    assert sleeps == [0.5, 1.0, 2.0]
    assert fake.paths(r"/orders/ledger/") == [ORDERS_ENTRY + "10/entry/2"] * 4 + [
        ORDERS_ENTRY + f"{l}/entry/{e}" for l, e in ORDERS_WINDOW[1:]]
    assert report.gaps == [] and report.counts["http_retries"] == 3
    assert json.loads(files(tmp_path)[ORDERS + "dump.json"])["complete"] is True


def test_topic_gone_for_good_stops_its_dump_without_partial_chunks(fake, tmp_path):
    fake.script(r"/orders/ledger/", [TOPIC_NOT_FOUND] * 100)
    report = run(fake, tmp_path, collector=PulsarCollector(sleep=lambda s: None, retry_attempts=3),
                 dump=PulsarDump(concurrency=1, chunk_entries=2, max_entries_per_topic=1000))
    got = files(tmp_path)
    assert not [k for k in got if k.startswith(ORDERS + "dump/")]
    assert len(fake.paths(r"/orders/ledger/")) == 3  # one position, three attempts, then nothing more asked
    why = 'topic unavailable after 3 attempts (HTTP 404: {"reason": "Topic not found"})'
    assert [(g.source, g.error) for g in report.gaps] == [
        (fake.url + ORDERS_ENTRY + "10/entry/2", f"10:2..12:3 (7 positions) not fetched: {why}")]
    summary = json.loads(got[ORDERS + "dump.json"])
    assert (summary["entries_not_fetched"], summary["complete"], summary["reason"]) == (
        7, False, f"7 positions not fetched: {why}")
    assert report.counts["entries_read"] == 18  # the payments partitions were dumped

class CrashingSink(DirSink):
    """Fails like a full disk when asked to store `crash_on`."""

    def __init__(self, root, crash_on):
        super().__init__(root)
        self.crash_on = crash_on

    def put(self, relative_key, data):
        if relative_key == self.crash_on:
            raise OSError(28, "No space left on device")
        super().put(relative_key, data)


def _timeless(got: dict) -> dict:
    """The evidence without what depends on when it was read: read.json sidecars, dump.json's read instants."""
    out = {}
    for key, data in got.items():
        if key.endswith(".read.json") or key == "collection.json":
            continue
        if key.endswith("/dump.json"):
            doc = json.loads(data)
            data = {k: v for k, v in doc.items() if k not in ("read_started_at_ms", "read_finished_at_ms")}
        out[key] = data
    return out


def test_resume_skips_what_an_interrupted_attempt_stored(fake, tmp_path):
    fresh = run(fake, tmp_path / "fresh")
    fake.requests.clear()
    root = tmp_path / "resumed"
    with pytest.raises(OSError):
        run(fake, root, sink=CrashingSink(root, ORDERS + "dump/12/0-1.jsonl"),
            collector=PulsarCollector(sleep=lambda s: None, now_ms=itertools.count(1000).__next__))
    assert sorted(files(root)) == ["broker-version.txt"] + [ORDERS + k for k in (
        "dump/10/2-3.jsonl", "dump/10/4-4.jsonl", "message-ttl.json", "message-ttl.json.read.json",
        "stats-internal.json", "stats-internal.json.read.json",
        "stats.json", "stats.json.read.json", "subscriptions/audit%2Fsub%201/replicated-status.json",
        "subscriptions/audit%2Fsub%201/replicated-status.json.read.json",
        "subscriptions/orders-sub/replicated-status.json", "subscriptions/orders-sub/replicated-status.json.read.json")]
    interrupted = files(root)
    fake.requests.clear()
    report = run(fake, root, collector=PulsarCollector(sleep=lambda s: None, now_ms=itertools.count(5000).__next__))
    orders_paths = [p for p in fake.requests if "/orders/orders/" in p]
    assert sorted(orders_paths) == [ORDERS_ENTRY + f"12/entry/{e}" for e in range(4)]  # nothing stored is asked again
    assert (report.counts["keys_resumed"], report.counts["chunks_resumed"], report.counts["chunks_written"]) == (
        6, 2, 12)   # the broker version and the orders topic's five files
    assert report.counts["entries_read"] == fresh.counts["entries_read"] == 25
    stored = files(root)
    assert _timeless(stored) == _timeless(files(tmp_path / "fresh"))  # as if never interrupted
    assert all(stored[k] == v for k, v in interrupted.items())   # the first attempt's read instants are kept
    summary = json.loads(stored[ORDERS + "dump.json"])   # only this attempt's reads: the two chunks of ledger 12
    assert 5000 <= summary["read_started_at_ms"] < summary["read_finished_at_ms"]
    fake.requests.clear()
    again = run(fake, root)  # over a finished attempt: only discovery is asked, nothing is replaced
    assert fake.requests == ["/admin/v2/persistent/acme/orders", "/admin/v2/persistent/acme/orders/partitioned",
                             "/admin/v2/persistent/acme/orders/payments/partitions"]
    assert again.counts["dumps_resumed_complete"] == 3 and files(root) == stored


def test_concurrency_is_bounded_by_dump_concurrency(fake, tmp_path):
    fake.hold_first_wave(3)  # entry requests wait until 3 are in flight: fewer would stall the test
    report = run(fake, tmp_path, dump=PulsarDump(concurrency=3, chunk_entries=1000, max_entries_per_topic=1000))
    assert fake.max_in_flight == 3
    assert report.counts["entries_read"] == 25 and report.gaps == []


def test_cap_is_reported_as_a_gap(fake, tmp_path):
    fake.add_topic("acme/tx/pending", ScriptedTopic(Answer(200, real_body("pulsar-stats-internal-02.json")),
                                                    Answer(200, real_body("pulsar-stats-replication-07.json"))))
    report = run(fake, tmp_path, namespaces=(), topics=("persistent://acme/tx/pending",),
                 dump=PulsarDump(concurrency=2, chunk_entries=1000, max_entries_per_topic=5))
    got = files(tmp_path)
    assert [k for k in got if "/dump/" in k] == ["topics/acme/tx/pending/dump/56/0-4.jsonl"]
    assert got["topics/acme/tx/pending/dump/56/0-4.jsonl"] == b"".join(
        expected_line(56, e, plain_entry(56, e)) for e in range(5))
    assert len(fake.paths("/ledger/")) == 5
    assert [(g.source, g.what, g.error) for g in report.gaps] == [(
        fake.url + "/admin/v2/persistent/acme/tx/pending/ledger/56/entry/5", WHAT,
        "56:5..64:51 (2242 positions) not fetched: beyond dump.max_entries_per_topic=5")]
    summary = json.loads(got["topics/acme/tx/pending/dump.json"])
    assert (summary["from"], summary["to"], summary["entries_expected"], summary["entries_read"],
            summary["entries_not_fetched"], summary["complete"]) == ("56:-1", "64:51", 2247, 5, 2242, False)

class DataOnlyReader:
    """A Reader's view of the orders topic: data messages only (the broker never hands out markers)."""

    def __init__(self, fake):
        self.topic, self.calls = fake.topics["acme/orders/orders"], []

    def read(self, topic, after, until):
        self.calls.append((topic, str(after), str(until)))
        for l, e in ORDERS_WINDOW:
            ans = self.topic.entry(l, e)
            if not any(name == "X-Pulsar-marker-type" for name, _ in ans.headers):
                yield ReaderEntry(Position(l, e), {"X-Pulsar-Message-ID": f"{l}:{e}"}, ans.body)


def test_reader_mode_fetches_only_the_server_only_positions(fake, tmp_path):
    reader = DataOnlyReader(fake)
    report = run(fake, tmp_path, collector=PulsarCollector(sleep=lambda s: None, reader=reader), namespaces=(),
                 topics=("persistent://acme/orders/orders",))
    assert reader.calls == [("persistent://acme/orders/orders", "10:1", "12:3")]
    assert fake.paths("/ledger/") == [ORDERS_ENTRY + "10/entry/3", ORDERS_ENTRY + "12/entry/0"]
    lines = [json.loads(line) for k, data in files(tmp_path).items() if "/dump/" in k for line in data.splitlines()]
    assert [(d["ledger_id"], d["entry_id"], d.get("via")) for d in lines] == [
        (10, 2, "reader"), (10, 3, None), (10, 4, "reader"), (12, 0, None), (12, 1, "reader"), (12, 2, "reader"),
        (12, 3, "reader")]
    assert base64.b64decode(lines[0]["body_b64"]) == b"\x00\xffreplicated"
    assert (report.counts["entries_from_reader"], report.counts["entries_read"], report.gaps) == (5, 7, [])
    si = decode_stats_internal(files(tmp_path)[ORDERS + "stats-internal.json"], "x")
    assert str(si.last_confirmed_entry) == "12:3"
