"""The real Kafka 3.6.2 broker log dir (tests/fixtures/real/kafka-broker-logdir-01, a single-broker ZooKeeper
cluster) scanned, normalized and audited: zero findings. With the cluster's one broker declared (`brokers: [0]`)
every partition is judged as the single replica it is; without it one coverage row for the cluster says the
cross-replica rules could not run and what would settle it."""
from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from audit.systems.kafka.collect.logdir import scan_log_dir
from audit.contracts import AuditRequest
from audit.systems.kafka.transforms import normalize
from audit.systems.kafka.transforms.audit import run

LOGDIR = Path(__file__).resolve().parents[2] / "fixtures" / "real" / "kafka-broker-logdir-01"


@pytest.mark.parametrize("brokers", [(0,), ()])
def test_real_broker_log_dir_audits_clean(spark, tmp_path, brokers):
    raw = tmp_path / "raw" / "kafka" / "real"

    def put(key: str, data: bytes) -> None:
        path = raw / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    scan = scan_log_dir(str(LOGDIR), 0, put, check_broker=False)
    assert not scan.gaps
    normalize.run(spark, str(tmp_path / "raw"), str(tmp_path / "tables"))
    thresholds = SimpleNamespace(kafka_follower_lag_max=10_000, kafka_mm2_redelivery_tolerance=0)
    counts = run(spark, str(tmp_path / "tables"), str(tmp_path / "out"),
                 AuditRequest("real", None, thresholds, (SimpleNamespace(name="real", version="3.6.2", mirrors=(),
                                                                         brokers=brokers),)))
    assert counts["kafka_violations"] == 0 and counts["kafka_violations_by_check"] == {}
    replicas = pq.read_table(tmp_path / "out" / "metrics" / "kafka_replicas").to_pylist()
    one = next(r for r in replicas if r["topic"] == "one")
    assert (one["batches"], one["log_end_offset"], one["high_watermark"], one["batch_epoch_violations"],
            one["sequence_gaps"]) == (11, 11, 11, 0, 0)
    assert counts["kafka_partitions"] == counts["kafka_replicas"] == len(replicas) == 51
    coverage = pq.read_table(tmp_path / "out" / "metrics" / "kafka_coverage").to_pylist()
    if brokers:
        assert coverage == []
    else:
        (row,) = coverage
        assert (row["cluster"], row["topic"], row["broker"]) == ("real", None, None)
        assert row["what"] == ("51 partition(s) found on one broker only and no metadata: cross-replica rules not "
                               "run; add the other brokers' log dirs, or declare the cluster's brokers: in the estate")
        assert json.loads(row["detail"])["partitions"] == 51
    assert os.listdir(tmp_path / "out" / "findings" / "violations" / "system=kafka")
