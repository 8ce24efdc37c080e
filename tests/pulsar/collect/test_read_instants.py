"""Read instants of the admin collector (`<key>.read.json`, dump.json's read_started/finished_at_ms) against the lab
served over loopback, and what a resumed attempt does with them."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from audit.collectors.base import DirSink
from audit.systems.pulsar.collect.collector import PulsarCollector
from audit.systems.pulsar.collect.dump import wall_ms
from audit.systems.pulsar.config import PulsarCluster, PulsarDump
from audit.config.secrets import SecretResolver
from audit.systems.pulsar.formats.read_instant import READ_SUFFIX, decode_read_instant
from lab.pulsar.admin_server import serve_pulsar_admin
from lab.pulsar.runner import lab_world
from tests.pulsar.collect.test_collector import ORDERS, files, run  # noqa: F401
from tests.pulsar.collect.test_collector import fake  # noqa: F401  (the fixture)
from tests.pulsar.collect.test_dump import CrashingSink

AS_OF_MS = 1_795_440_000_000
BODIES = ("stats-internal.json", "stats.json")


SHORT_DUMP = PulsarDump(chunk_entries=2, max_entries_per_topic=4)   # one admin GET per entry: keep the tests quick


def lab_cluster(world, name: str, url: str, **kw) -> PulsarCluster:
    """The lab cluster as an admin estate entry, its dumps capped at SHORT_DUMP (the rest is a cap gap)."""
    namespaces = sorted({t.name.split("//")[1].rsplit("/", 1)[0] for t in world.topics_of(name)})
    return PulsarCluster(name=name, source="admin", admin_url=url, namespaces=tuple(namespaces), dump=SHORT_DUMP,
                         **kw)


def only_cap_gaps(report) -> bool:
    return all(g.what == "topic entries" and "beyond dump.max_entries_per_topic" in g.error for g in report.gaps)


def instant(root: Path, key: str):
    return decode_read_instant((root / (key + READ_SUFFIX)).read_bytes(), key)


def topic_folders(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("topics/*/*/*/stats-internal.json"))


def test_every_topic_body_has_its_instant_and_the_window_is_read_before_the_dump(tmp_path):
    world, _ = lab_world({"seed": 7}, AS_OF_MS)
    clock = itertools.count(10_000)
    with serve_pulsar_admin(world, "east") as url:
        report = PulsarCollector(now_ms=clock.__next__).collect(lab_cluster(world, "east", url), DirSink(tmp_path),
                                                                SecretResolver(environ={}))
    assert only_cap_gaps(report)
    folders = topic_folders(tmp_path)
    assert len(folders) == len(world.topics_of("east"))
    last = 0
    for folder in folders:   # topic by topic, in collection order: each read after the one before
        key = folder.relative_to(tmp_path).as_posix()
        si, stats = (instant(tmp_path, f"{key}/{name}") for name in BODIES)
        assert si.url == f"{url}/admin/v2/persistent/{key.removeprefix('topics/')}/internalStats"
        assert last < si.requested_at_ms < si.answered_at_ms < stats.requested_at_ms < stats.answered_at_ms
        last = stats.answered_at_ms
        for status in sorted(folder.glob("subscriptions/*/replicated-status.json")):
            read = instant(tmp_path, status.relative_to(tmp_path).as_posix())
            assert last < read.requested_at_ms < read.answered_at_ms and read.url.endswith(
                "/replicatedSubscriptionStatus")
            last = read.answered_at_ms
        dump = json.loads((folder / "dump.json").read_bytes())
        if dump["entries_expected"]:
            assert si.answered_at_ms <= last < dump["read_started_at_ms"] < dump["read_finished_at_ms"]
            last = dump["read_finished_at_ms"]
        else:   # an empty window: nothing was read
            assert dump["read_started_at_ms"] is dump["read_finished_at_ms"] is None


def test_the_default_clock_is_the_wall_clock_in_milliseconds(tmp_path):
    world, _ = lab_world({"seed": 7}, AS_OF_MS)
    before = wall_ms()
    with serve_pulsar_admin(world, "south") as url:
        PulsarCollector().collect(lab_cluster(world, "south", url), DirSink(tmp_path), SecretResolver(environ={}))
    after = wall_ms()
    [folder] = topic_folders(tmp_path)
    read = instant(tmp_path, folder.relative_to(tmp_path).as_posix() + "/stats-internal.json")
    assert before <= read.requested_at_ms <= read.answered_at_ms <= after
    dump = json.loads((folder / "dump.json").read_bytes())
    assert read.answered_at_ms <= dump["read_started_at_ms"] <= dump["read_finished_at_ms"] <= after


def test_a_body_stored_without_its_instant_keeps_none_when_resumed(fake, tmp_path):   # noqa: F811
    key = ORDERS + "stats-internal.json"
    with pytest.raises(OSError):   # killed between the body and its instant
        run(fake, tmp_path, sink=CrashingSink(tmp_path, key + READ_SUFFIX))
    assert key in files(tmp_path) and key + READ_SUFFIX not in files(tmp_path)
    run(fake, tmp_path)
    got = files(tmp_path)
    assert key + READ_SUFFIX not in got   # the read happened in the first attempt: no instant is made up
    assert ORDERS + "stats.json" + READ_SUFFIX in got   # what the resumed attempt read has its own
