"""The admin reread (audit/systems/pulsar/collect/reread.py) against lab clusters served over loopback: every collected
topic read again on every cluster that collected it, two passes in estate order, each read with its instant."""
from __future__ import annotations

import contextlib
import itertools
import shutil
from pathlib import Path

import pytest

from audit.collectors.base import DirSink
from audit.systems.pulsar.collect.collector import PulsarCollector
from audit.systems.pulsar.collect.reread import WHAT, reread
from audit.config.model import SecretRef
from audit.config.secrets import SecretResolver
from audit.contracts import RereadRequest
from audit.systems.pulsar.formats.read_instant import READ_SUFFIX, decode_read_instant
from lab.pulsar.admin_server import serve_pulsar_admin
from lab.pulsar.runner import lab_world
from tests.pulsar.collect.test_read_instants import AS_OF_MS, lab_cluster, only_cap_gaps

CLUSTERS = ("east", "west", "south")   # estate order; south holds one of the topics only
TOKEN = "lab-token"


def keys(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """Every cluster served (for the whole module) and collected once into raw/<name>: (world, clusters, raw)."""
    world, _ = lab_world({"seed": 7}, AS_OF_MS)
    raw = tmp_path_factory.mktemp("reread") / "raw"
    clusters = []
    with contextlib.ExitStack() as stack:
        for name in CLUSTERS:
            url = stack.enter_context(serve_pulsar_admin(world, name, token=TOKEN))
            cluster = lab_cluster(world, name, url, token=SecretRef(env="LAB_TOKEN"))
            assert only_cap_gaps(PulsarCollector().collect(cluster, DirSink(raw / name), secrets()))
            clusters.append(cluster)
        yield world, tuple(clusters), raw


def secrets(token: str = TOKEN) -> SecretResolver:
    return SecretResolver(environ={"LAB_TOKEN": token})


def request(clusters, raw: Path, sinks: Path, token: str = TOKEN) -> RereadRequest:
    """As the pipeline builds it: a sink per cluster (a staging folder) and the keys the run holds for it."""
    return RereadRequest(clusters, lambda name: DirSink(sinks / name), lambda name: keys(raw / name),
                         secrets(token), AS_OF_MS, None)


def topics_of(raw: Path, name: str) -> list[str]:
    return sorted(k.removesuffix("/stats-internal.json") for k in keys(raw / name)
                  if k.count("/") == 4 and k.endswith("/stats-internal.json"))


def test_two_passes_per_topic_in_estate_order(lab, tmp_path):
    _, clusters, raw = lab
    clock = itertools.count(1)
    reports = reread(request(clusters, raw, tmp_path), now_ms=clock.__next__)
    assert list(reports) == list(CLUSTERS) and all(r.gaps == [] for r in reports.values())
    reads = []   # (instant, topic, pass, cluster) of every reread
    for name in CLUSTERS:
        topics = topics_of(raw, name)
        assert reports[name].counts == {"rereads_stored": 2 * len(topics), "http_requests": 2 * len(topics)}
        assert keys(tmp_path / name) == sorted(f"{t}/rereads/{n}/stats-internal.json{s}" for t in topics
                                               for n in (1, 2) for s in ("", READ_SUFFIX))
        for topic in topics:
            primary = (raw / name / topic / "stats-internal.json").read_bytes()
            for n in (1, 2):
                key = f"{topic}/rereads/{n}/stats-internal.json"
                assert (tmp_path / name / key).read_bytes() == primary   # the lab stands still: same body
                read = decode_read_instant((tmp_path / name / (key + READ_SUFFIX)).read_bytes(), key)
                assert read.url.endswith(topic.removeprefix("topics") + "/internalStats")
                reads.append(((read.requested_at_ms, read.answered_at_ms), topic, n, name))
    reads.sort()
    order = [(topic, n, name) for _, topic, n, name in reads]
    # topic by topic, and for each topic c1, c2, (c3,) c1, c2, (c3): every read between two of the others
    topics = sorted({t for _, t, _, _ in reads}, key=lambda t: t.split("/"))   # by (tenant, namespace, topic)
    assert order == [(t, n, c) for t in topics for n in (1, 2) for c in CLUSTERS if t in topics_of(raw, c)]
    assert all(a[1] < b[0] for (a, *_), (b, *_) in zip(reads, reads[1:]))   # requested after the last answer
    assert ("topics/lab/geo3/payments", 2, "south") in order   # south collected only this topic


def test_a_cluster_that_stops_answering_is_a_gap_and_the_others_are_reread(lab, tmp_path):
    world, (east, west, south), raw = lab
    with serve_pulsar_admin(world, "west") as url:   # west's broker went away after its collection
        gone = lab_cluster(world, "west", url)
    reports = reread(request((east, gone, south), raw, tmp_path), sleep=lambda s: None)
    assert len(reports["west"].gaps) == 2 * len(topics_of(raw, "west"))
    assert "rereads_stored" not in reports["west"].counts
    assert {(g.what, g.source.rsplit("/", 1)[1]) for g in reports["west"].gaps} == {(WHAT, "internalStats")}
    assert all(g.error.startswith("connection failed") for g in reports["west"].gaps)
    assert not (tmp_path / "west").exists() or keys(tmp_path / "west") == []
    for name in ("east", "south"):
        assert reports[name].gaps == [] and reports[name].counts["rereads_stored"] == 2 * len(topics_of(raw, name))


def test_a_refused_token_stops_that_cluster_only(lab, tmp_path):
    _, clusters, raw = lab
    reports = reread(request(clusters, raw, tmp_path, token="stale"))
    for name, report in reports.items():   # every cluster refuses it here: one request each, then stop
        assert report.counts == {"http_requests": 1}
        assert [g.what for g in report.gaps] == [WHAT, "admin API (reread stopped)"]
        assert report.gaps[1].error.startswith("HTTP 401") and "stale" not in repr(report.gaps)
    missing = reread(RereadRequest(clusters[:1], lambda n: DirSink(tmp_path / n), lambda n: keys(raw / n),
                                   SecretResolver(environ={}), AS_OF_MS, None))
    assert [g.what for g in missing["east"].gaps] == ["admin API (reread not done)"]
    assert "LAB_TOKEN" in missing["east"].gaps[0].error


def test_resume_keeps_stored_rereads(lab, tmp_path):
    _, clusters, collected = lab
    raw = tmp_path / "raw"
    shutil.copytree(collected, raw)
    first = reread(request(clusters, raw, tmp_path / "first"), now_ms=itertools.count(1).__next__)
    stored = {name: {k: (tmp_path / "first" / name / k).read_bytes() for k in keys(tmp_path / "first" / name)}
              for name in CLUSTERS}
    again = reread(request(clusters, raw, tmp_path / "first"), now_ms=itertools.count(10_000).__next__)
    for name in CLUSTERS:   # the same sinks: every key is there already
        n = first[name].counts["rereads_stored"]
        assert again[name].counts == {"keys_resumed": n, "http_requests": 0} and again[name].gaps == []
        assert {k: (tmp_path / "first" / name / k).read_bytes() for k in keys(tmp_path / "first" / name)} == \
            stored[name]
    # the rereads already in the run (listed by `collected`), a fresh sink: nothing is asked again
    for name in CLUSTERS:
        for key, data in stored[name].items():
            DirSink(raw / name).put(key, data)
    third = reread(request(clusters, raw, tmp_path / "third"))
    assert all(r.counts["http_requests"] == 0 and r.counts["keys_resumed"] > 0 for r in third.values())
    assert not (tmp_path / "third").exists() or all(keys(tmp_path / "third" / n) == [] for n in CLUSTERS)
