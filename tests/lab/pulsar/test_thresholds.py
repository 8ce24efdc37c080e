"""The lab's ground truth judges by the estate's thresholds, the ones the audit applies."""
from audit.collectors.base import DirSink
from audit.systems.pulsar.config import PulsarCluster
from lab.pulsar.runner import collect as collect_lab_pulsar_cluster

AS_OF_MS = 1_795_440_000_000


def _backlog_findings(tmp_path, name, thresholds, lab=None):
    cluster = PulsarCluster(name="east", source="lab", lab=lab or {"seed": 7})
    _, truth = collect_lab_pulsar_cluster(cluster, DirSink(tmp_path / name), None, AS_OF_MS, thresholds)
    return [f for f in truth["findings"] if f["check"] == "pulsar.replicator_backlog"]


def test_estate_backlog_threshold_reaches_the_ground_truth(tmp_path):
    assert _backlog_findings(tmp_path, "default", {"replicator_backlog_max": 10_000}) == []
    low = _backlog_findings(tmp_path, "low", {"replicator_backlog_max": 10})
    assert low and {f["cluster"] for f in low} == {"east"}
    # a value in the lab mapping itself wins over the estate's
    assert _backlog_findings(tmp_path, "lab", {"replicator_backlog_max": 10},
                             lab={"seed": 7, "replicator_backlog_max": 10_000}) == []


def test_the_estates_redelivery_tolerance_reaches_the_ground_truth(tmp_path):
    def lagging(thresholds):
        cluster = PulsarCluster(name="east", source="lab", lab={"seed": 7, "scenarios": ["standby-replicator-down"]})
        _, truth = collect_lab_pulsar_cluster(cluster, DirSink(tmp_path / str(len(list(tmp_path.iterdir())))), None,
                                              AS_OF_MS, thresholds)
        return [f["entry_count"] for f in truth["findings"] if f["check"] == "pulsar.failover_redelivery"]

    assert lagging(None) == [22]
    assert lagging({"redelivery_tolerance": {"lab/geo": [22, 0]}}) == []       # no more than 22 messages
    assert lagging({"redelivery_tolerance": {"*": [0, 3600]}}) == []           # none older than an hour
    assert lagging({"redelivery_tolerance": {"*": [21, 60]}}) == [22]
