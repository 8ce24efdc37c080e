"""`replaudit import --system kafka` kinds, fed the way the CLI feeds them (audit/cli/import_dumps.walk)."""
import json
from pathlib import Path

import pytest

from audit.cli.import_dumps import walk
from audit.systems.kafka.collect.imports import KINDS
from tests.kafka.collect.build import standard_log_dir, tree

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"


class Put(dict):
    """The CLI's put: stores, and knows what the run already holds."""

    def __init__(self, already=()):
        super().__init__()
        self.already = set(already)

    def __call__(self, key, data):
        assert key not in self
        self[key] = bytes(data)

    def exists(self, key):
        return key in self.already or key in self


def run(kind, paths, put=None, **options):
    put = put if put is not None else Put()
    return put, KINDS[kind].store(put, "east", walk([Path(p) for p in paths]), options)


def test_a_real_log_dir_is_scanned_into_the_collector_layout():
    put, result = run("log-dir", [REAL / "kafka-broker-logdir-01"], broker="0")
    assert result["rejected"] == [] and set(result["stored"]) == set(put)
    scan = json.loads(put["brokers/0/dir0/scan.json"])
    assert scan["errors"] == [] and len(scan["partitions"]) == 51
    on_disk = tree(REAL / "kafka-broker-logdir-01")
    assert put["brokers/0/dir0/one-0/leader-epoch-checkpoint"] == on_disk["one-0/leader-epoch-checkpoint"]
    assert put["brokers/0/dir0/replication-offset-checkpoint"] == on_disk["replication-offset-checkpoint"]


def test_the_broker_flag_is_checked_against_meta_properties():
    with pytest.raises(ValueError) as e:
        run("log-dir", [REAL / "kafka-broker-logdir-01"], broker="3")
    text = str(e.value)
    assert text.startswith("--broker 3:") and "broker.id=0" in text and "--broker 0" in text
    for bad in ("x", "-1", None):
        with pytest.raises(ValueError, match="--broker"):
            run("log-dir", [REAL / "kafka-broker-logdir-01"], broker=bad)


def test_several_dirs_take_the_next_free_positions_and_evidence_is_never_replaced(tmp_path):
    a, b = standard_log_dir(tmp_path / "a", broker=4), standard_log_dir(tmp_path / "b", broker=4)
    put = Put(already={"brokers/4/dir0/scan.json"})
    put, result = run("log-dir", [a, b], put=put, broker="4")
    assert json.loads(put["brokers/4/dir1/scan.json"])["log_dir"] == str(a)
    assert json.loads(put["brokers/4/dir2/scan.json"])["log_dir"] == str(b)
    put, result = run("log-dir", [a], put=put, broker="4", index="1")
    assert result["stored"] == [] and "already stored" in result["rejected"][0]["reason"]
    with pytest.raises(ValueError, match="--index"):
        run("log-dir", [a], broker="4", index="first")


def test_dump_log_outputs(tmp_path):
    put, result = run("dump-log", [REAL / "kafka-dump-log-01.txt", REAL / "kafka-dump-log-02.txt"], broker="2")
    assert result["rejected"] == []
    assert put["brokers/2/dump-log/kafka-dump-log-02.txt"] == (REAL / "kafka-dump-log-02.txt").read_bytes()
    junk = tmp_path / "notes.txt"
    junk.write_text("baseOffset is the first offset of a batch\n")
    put, result = run("dump-log", [junk], broker="2")
    assert put == {} and "notes.txt" in result["rejected"][0]["reason"] and "Dumping" in result["rejected"][0]["reason"]
    with pytest.raises(ValueError, match="--broker"):
        run("dump-log", [junk])


def test_log_dirs_describe_output(tmp_path):
    put, result = run("log-dirs-describe", [REAL / "kafka-log-dirs-01.txt"])
    assert result["stored"] == ["admin/log-dirs-describe/kafka-log-dirs-01.txt"]
    broken = tmp_path / "describe.txt"
    broken.write_text("Querying brokers for log directories information\n{\"version\":1,\"brokers\":[{\"broker\":\n")
    put, result = run("log-dirs-describe", [broken])
    assert put == {} and "JSON" in result["rejected"][0]["reason"]


def test_mirror_maker_formatter_text(tmp_path):
    put, result = run("mm2-checkpoints", [REAL / "kafka-mm2-checkpoints-01.txt"], mirror="source")
    assert result["stored"] == ["mm2/source/checkpoints-text/kafka-mm2-checkpoints-01.txt"]
    syncs = tmp_path / "syncs.txt"
    syncs.write_text("OffsetSync{topicPartition=orders-0, upstreamOffset=100, downstreamOffset=98}\n"
                     "OffsetSync{topicPartition=my-topic-3, upstreamOffset=7, downstreamOffset=7}\n")
    old = tmp_path / "old.txt"   # Kafka <= 3.5 spelled it metatadata=
    old.write_text("Checkpoint{consumerGroupId=g, topicPartition=west.orders-0, upstreamOffset=5, "
                   "downstreamOffset=4, metatadata=}\n")
    put, result = run("mm2-offset-syncs", [syncs], mirror="west")
    assert result["stored"] == ["mm2/west/offset-syncs-text/syncs.txt"]
    put, result = run("mm2-checkpoints", [old], mirror="west")
    assert result["stored"] == ["mm2/west/checkpoints-text/old.txt"]
    put, result = run("mm2-checkpoints", [syncs], mirror="west")
    assert put == {} and "Checkpoint{...} lines" in result["rejected"][0]["reason"]
    with pytest.raises(ValueError, match="--mirror"):
        run("mm2-checkpoints", [old], mirror="we st")
