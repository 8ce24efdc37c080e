"""The real admin REST collector against the lab served over HTTP collects the same evidence the lab emits
directly: the lab's direct path and the collector's path cannot drift apart."""
from __future__ import annotations

from pathlib import Path

from audit.collectors.base import DirSink
from audit.systems.pulsar.collect.collector import PulsarCollector
from audit.config.model import SecretRef
from audit.systems.pulsar.config import PulsarCluster
from audit.config.secrets import SecretResolver
from audit.systems.pulsar.formats.entry import decode_dump_chunk
from audit.systems.pulsar.formats.read_instant import READ_SUFFIX, decode_read_instant
from lab.pulsar.admin_server import serve_pulsar_admin
from lab.pulsar.emit import emit_cluster
from lab.pulsar.runner import lab_world

AS_OF_MS = 1_795_440_000_000


def _evidence(root: Path) -> tuple[dict[str, bytes], dict[str, set]]:
    """(every non-dump file by key, dumped entries per topic folder decoded from their chunks). Read instants
    (.read.json) are left out: they say when, not what."""
    files, entries = {}, {}
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name in ("collection.json", "dump.json") or path.name.endswith(READ_SUFFIX):
            continue
        key = path.relative_to(root).as_posix()
        if "/dump/" in key:
            topic = key.split("/dump/")[0]
            for rec in decode_dump_chunk(path.read_bytes(), key):
                entries.setdefault(topic, set()).add(repr(rec))
        else:
            files[key] = path.read_bytes()
    return files, entries


def test_collector_over_http_matches_direct_emission(tmp_path):
    world, _ = lab_world({"seed": 7, "traffic": "quiet"}, AS_OF_MS)   # the old volume: every entry goes over HTTP
    emit_cluster(world, "east", DirSink(tmp_path / "direct"))
    namespaces = sorted({t.name.split("//")[1].rsplit("/", 1)[0] for t in world.topics_of("east")})
    with serve_pulsar_admin(world, "east", token="lab-token") as url:
        cluster = PulsarCluster(name="east", source="admin", admin_url=url, token=SecretRef(env="LAB_TOKEN"),
                                namespaces=tuple(namespaces))
        report = PulsarCollector().collect(cluster, DirSink(tmp_path / "http"),
                                           SecretResolver(environ={"LAB_TOKEN": "lab-token"}))
    assert report.gaps == []
    direct_files, direct_entries = _evidence(tmp_path / "direct")
    http_files, http_entries = _evidence(tmp_path / "http")
    assert sorted(http_files) == sorted(direct_files)
    for key, body in direct_files.items():
        assert http_files[key] == body, key
    assert http_entries == direct_entries
    assert sum(len(v) for v in http_entries.values()) == report.counts["entries_read"] > 100
    assert "lab-token" not in "".join(repr(v) for v in http_files.values())
    # every admin body of a topic has its read instant, the URL it was read from
    http = tmp_path / "http"
    sidecars = {p.relative_to(http).as_posix(): p for p in http.rglob("*" + READ_SUFFIX)}
    assert sorted(sidecars) == sorted(k + READ_SUFFIX for k in http_files if k.startswith("topics/")
                                      and "/dump/" not in k)
    for key, path in sidecars.items():
        read = decode_read_instant(path.read_bytes(), key)
        assert read.url.startswith(url + "/admin/v2/persistent/") and read.requested_at_ms <= read.answered_at_ms
    direct = sorted(p.relative_to(tmp_path / "direct").as_posix()
                    for p in (tmp_path / "direct").rglob("*" + READ_SUFFIX))
    assert direct in ([], sorted(sidecars))   # the lab, when it writes instants, writes them for the same bodies


def test_collector_stores_the_broker_version_the_lab_cluster_runs(tmp_path):
    world, _ = lab_world({"seed": 7, "broker_versions": {"east": "4.2.0"}}, AS_OF_MS)
    emit_cluster(world, "east", DirSink(tmp_path / "direct"))
    with serve_pulsar_admin(world, "east") as url:
        cluster = PulsarCluster(name="east", source="admin", admin_url=url, namespaces=("lab/none",))
        PulsarCollector().collect(cluster, DirSink(tmp_path / "http"), SecretResolver(environ={}))
    assert (tmp_path / "http" / "broker-version.txt").read_bytes() == b"4.2.0"
    assert (tmp_path / "direct" / "broker-version.txt").read_bytes() == b"4.2.0"
