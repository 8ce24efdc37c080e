"""KafkaCollector end to end: estate entries (audit/systems/kafka/config.py) into a DirSink, by source."""
import json

import pytest

from audit.collectors.base import DirSink
from audit.systems.kafka.collect.collector import KafkaCollector, KafkaConfigError
from audit.systems.kafka.config import KafkaCluster
from audit.config.secrets import SecretResolver
from audit.systems.kafka.formats.mm2 import Checkpoint, OffsetSync, encode_checkpoint, encode_offset_sync
from tests.kafka.collect.build import standard_log_dir, write_log_dir
from tests.kafka.collect.mock_cluster import MockCluster
from tests.kafka.collect.test_admin import Clock, served
from lab.kafka.admin_server import AdminServer

SECRETS = SecretResolver(environ={})


def files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_admin_source_reads_the_cluster_its_mounted_log_dirs_and_reports_what_it_could_not(tmp_path):
    standard_log_dir(tmp_path / "b1", broker=1)
    write_log_dir(tmp_path / "b2", 9, [])                     # mounted at the wrong place: broker 9's dir
    raw = tmp_path / "raw"
    with AdminServer(served()) as server:
        cluster = KafkaCluster(name="east", source="admin", bootstrap_servers=server.bootstrap_servers(),
                               log_dirs=[{"broker": 1, "path": str(tmp_path / "b1")},
                                         {"broker": 2, "path": str(tmp_path / "b2")}],
                               mirrors=[{"source_cluster": "west"}], timeouts={"request_s": 2})
        report = KafkaCollector(now_ms=Clock()).collect(cluster, DirSink(raw), SECRETS)
    stored = files(raw)
    assert {"admin/metadata.json", "admin/log-dirs.json", "admin/list-offsets.json",
            "admin/offsets-for-leader-epoch.json", "brokers/1/dir0/scan.json",
            "brokers/1/dir0/orders-0/batches.json"} <= set(stored)
    assert not any(k.startswith(("brokers/2/", "mm2/")) for k in stored)
    gaps = {g.what: g for g in report.gaps}
    assert gaps["log dir of broker 2 (not read)"].error == (
        "meta.properties broker.id=9: the estate lists it as broker 2")
    assert gaps["MirrorMaker 2 flow (nothing read)"].source == "mirror west"
    assert len(report.gaps) == 2
    assert report.counts["partitions_indexed"] == 3 and report.counts["keys_stored"] == 4


def test_resuming_into_the_same_folder_keeps_what_was_stored(tmp_path):
    standard_log_dir(tmp_path / "b1", broker=1)
    raw = tmp_path / "raw"
    with AdminServer(served()) as server:
        cluster = KafkaCluster(name="east", source="admin", bootstrap_servers=server.bootstrap_servers(),
                               log_dirs=[{"broker": 1, "path": str(tmp_path / "b1")}], timeouts={"request_s": 2})
        KafkaCollector(now_ms=Clock()).collect(cluster, DirSink(raw), SECRETS)
        before = {k: (raw / k).read_bytes() for k in files(raw)}
        (raw / "admin" / "list-offsets.json").unlink()       # an attempt killed before its last documents
        again = KafkaCollector(now_ms=Clock()).collect(cluster, DirSink(raw), SECRETS)
    assert again.counts["keys_resumed"] == 3 and again.counts["log_dirs_resumed"] == 1 and again.gaps == []
    after = {k: (raw / k).read_bytes() for k in files(raw)}
    assert set(after) == set(before)
    assert all(after[k] == before[k] for k in before if k != "admin/list-offsets.json")


def test_mirror_flows_use_the_source_entry_from_the_estate(tmp_path):
    with MockCluster(brokers=1) as west, MockCluster(brokers=1) as east:
        west.create_topic("mm2-offset-syncs.east.internal")
        east.create_topic("west.checkpoints.internal")
        west.produce("mm2-offset-syncs.east.internal", [encode_offset_sync(OffsetSync("orders", 0, 10, 9))])
        east.produce("west.checkpoints.internal", [encode_checkpoint(Checkpoint("g", "west.orders", 0, 10, 9, ""))])
        target = KafkaCluster(name="east", source="admin", bootstrap_servers=east.bootstraps,
                              mirrors=[{"source_cluster": "west"}], timeouts={"request_s": 0.5})
        source = KafkaCluster(name="west", source="admin", bootstrap_servers=west.bootstraps,
                              timeouts={"request_s": 0.5})
        raw = tmp_path / "raw"
        report = KafkaCollector(clusters={"west": source}, now_ms=Clock()).collect(target, DirSink(raw), SECRETS)
    assert {"mm2/west/offset-syncs.json", "mm2/west/checkpoints.json", "mm2/west/groups.json"} <= set(files(raw))
    assert json.loads((raw / "mm2/west/checkpoints.json").read_bytes())["end_offsets"] == {"0": 1}
    # kafka-python cannot decode the mock's ApiVersions reply, so it never bootstraps: the admin part is one gap
    assert [g.what for g in report.gaps if g.what.startswith("admin")] == ["admin endpoint (nothing read)"]


def test_log_dirs_source_reads_nothing_remote(tmp_path):
    raw = tmp_path / "raw"
    only_imports = KafkaCluster(name="old", source="log-dirs")
    report = KafkaCollector().collect(only_imports, DirSink(raw), SECRETS)
    assert report.counts == {"import_only": 1} and report.gaps == [] and not raw.exists()
    standard_log_dir(tmp_path / "b3", broker=3)
    mounted = KafkaCluster(name="old", source="log-dirs", log_dirs=[{"broker": 3, "path": str(tmp_path / "b3")}])
    report = KafkaCollector().collect(mounted, DirSink(raw), SECRETS)
    assert report.counts["log_dirs_scanned"] == 1 and "import_only" not in report.counts
    assert (raw / "brokers/3/dir0/scan.json").is_file()


def test_lab_clusters_are_not_collected():
    lab = KafkaCluster(name="sim", source="lab", lab={"scenario": "healthy"})
    with pytest.raises(KafkaConfigError, match="source"):
        KafkaCollector().collect(lab, DirSink("/nonexistent"), SECRETS)
