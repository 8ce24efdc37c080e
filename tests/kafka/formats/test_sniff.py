"""Every real Kafka fixture through the Kafka sniffers, as `replaudit inspect` tries them (by-name ones first),
plus written samples of the kinds no real fixture has. No other system's sniffer may claim these files."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit import systems
from audit.errors import PayloadError
from audit.systems.kafka.formats import kraft, mm2, producer_snapshot
from audit.systems.kafka.formats.sniff import BY_NAME, SNIFFERS

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
ORDER = BY_NAME + SNIFFERS

EXPECTED = {
    "kafka-dump-log-01.txt": "kafka.dump_log",
    "kafka-dump-log-02.txt": "kafka.dump_log",
    "kafka-log-dirs-01.txt": "kafka.log_dirs",
    "kafka-describe-logdirs-02.fragment.txt": "kafka.log_dir_info_text",
    "kafka-mm2-checkpoints-01.txt": "kafka.mm2_formatter_text",
    "kafka-leader-epoch-checkpoint-01.txt": "kafka.leader_epoch_checkpoint",
    "kafka-broker-logdir-01/.lock": None,
    "kafka-broker-logdir-01/meta.properties": "kafka.meta_properties",
    "kafka-broker-logdir-01/replication-offset-checkpoint": "kafka.offset_checkpoint",
    "kafka-broker-logdir-01/recovery-point-offset-checkpoint": "kafka.offset_checkpoint",
    "kafka-broker-logdir-01/log-start-offset-checkpoint": "kafka.offset_checkpoint",
    "kafka-broker-logdir-01/cleaner-offset-checkpoint": "kafka.offset_checkpoint",
}
IN_PARTITION_DIR = {"leader-epoch-checkpoint": "kafka.leader_epoch_checkpoint",
                    "partition.metadata": "kafka.partition_metadata", "00000000000000000000.log": "kafka.segment"}


def _expected(rel: str) -> str | None:
    if rel in EXPECTED:
        return EXPECTED[rel]
    return IN_PARTITION_DIR[rel.rsplit("/", 1)[-1]]


def _fixtures() -> list[str]:
    files = [p for p in REAL.glob("kafka-*") if p.is_file() and not p.name.endswith(".src.txt")]
    files += [p for p in (REAL / "kafka-broker-logdir-01").rglob("*") if p.is_file()]
    return sorted(str(p.relative_to(REAL)) for p in files)


def _kind(data: bytes, name: str) -> tuple[str, object] | None:
    for kind, sniff, decode in ORDER:
        if sniff(data, name):
            return kind, decode
    return None


def test_every_real_fixture_file_is_listed():
    assert len(_fixtures()) == 6 + 159
    assert {_expected(rel) for rel in _fixtures()} == set(EXPECTED.values()) | set(IN_PARTITION_DIR.values())


@pytest.mark.parametrize("rel", _fixtures())
def test_real_fixture_kind_and_decode(rel):
    path = REAL / rel
    data = path.read_bytes()
    found = _kind(data, str(path))
    want = _expected(rel)
    if want is None:
        assert found is None
        return
    assert found is not None and found[0] == want
    out = found[1](data, str(path))
    json.dumps(out)   # what inspect prints
    assert not {"kind", "source"} & out.keys()   # inspect adds these two itself
    others = [kind for system in systems.all_systems() if system.name != "kafka"
              for kind, sniff, _ in [*system.pipeline.sniffers()[0], *system.pipeline.sniffers()[1]]
              if sniff(data, str(path))]
    assert others == []


def test_decoded_real_samples():
    def run(rel):
        data = (REAL / rel).read_bytes()
        kind, decode = _kind(data, rel)
        return decode(data, rel)

    assert run("kafka-leader-epoch-checkpoint-01.txt")["entries"] == [
        {"epoch": 0, "start_offset": 0}, {"epoch": 1, "start_offset": 1}, {"epoch": 2, "start_offset": 2}]
    hw = run("kafka-broker-logdir-01/replication-offset-checkpoint")
    assert hw["offset_meaning"] == "high watermark" and len(hw["entries"]) == 51
    assert run("kafka-broker-logdir-01/cleaner-offset-checkpoint")["entries"] == []
    seg = run("kafka-broker-logdir-01/one-0/00000000000000000000.log")
    assert (len(seg["batches"]), seg["read_bytes"], seg["tail"], seg["error"]) == (11, 924, None, None)
    assert all(b["crc_valid"] for b in seg["batches"])
    assert run("kafka-mm2-checkpoints-01.txt")["checkpoints"][0] == {
        "group": "mygroup1", "topic": "source.mytopic", "partition": 0, "upstream_offset": 500,
        "downstream_offset": 1, "metadata": ""}


def test_kinds_without_a_real_fixture():
    name, snap = kraft.encode_snapshot(10, 2, [("TopicRecord", 0, {"name": "t", "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ"})],
                                       last_contained_log_timestamp=5, timestamp=5)
    quorum = kraft.encode_quorum_state({"data_version": 1, "leader_id": 1, "leader_epoch": 3, "voted_id": -1})
    producers = producer_snapshot.encode_producer_snapshot([(7, 0, 4, 9, 4, 5, -1, -1)])
    syncs = {"topic": "mm2-offset-syncs.b.internal", "records": []}
    cps = {"topic": "a.checkpoints.internal", "records": []}
    samples = [
        (f"d/__cluster_metadata-0/{name}", snap, "kafka.metadata_snapshot"),
        ("d/__cluster_metadata-0/quorum-state", quorum, "kafka.quorum_state"),
        ("d/__cluster_metadata-0/00000000000000000000.log", snap, "kafka.metadata_log"),
        ("d/t-0/00000000000000000010.snapshot", producers, "kafka.producer_snapshot"),
        ("mm2/a/offset-syncs.json", json.dumps(syncs).encode(), "kafka.mm2_offset_syncs"),
        ("mm2/a/checkpoints.json", json.dumps(cps).encode(), "kafka.mm2_checkpoints"),
        ("leader-epoch-checkpoint.tmp", b"0\n1\n3 100\n", "kafka.leader_epoch_checkpoint"),
    ]
    for path, data, want in samples:
        kind, decode = _kind(data, path)
        assert kind == want, path
        out = decode(data, path)
        json.dumps(out)
        assert not {"kind", "source"} & out.keys()
    assert _kind(mm2.encode_offset_sync(mm2.OffsetSync("t", 0, 1, 1))[0], "key.bin") is None


def test_look_alikes_are_not_claimed():
    assert _kind(b"hello\n", "notes-leader-epoch-checkpoint.md") is None       # named like one, reads like none
    assert _kind(b"0\n1\n3 100\n", "epochs.txt") is None                        # reads like one, named like none
    assert _kind(b"{}", "meta.json") is None


def test_a_broken_file_that_sniffs_right_is_a_payload_error():
    kind, decode = _kind(b"0\n2\n0 0\n", "leader-epoch-checkpoint")
    with pytest.raises(PayloadError, match="entries as the count line says"):
        decode(b"0\n2\n0 0\n", "leader-epoch-checkpoint")
    bad_dump = b"Dumping /d/0.log\nStarting offset: 0\nbaseOffset: 0 lastOffset: 0 count: 1 oops\n"
    kind, decode = _kind(bad_dump, "dump.txt")
    assert kind == "kafka.dump_log"
    with pytest.raises(PayloadError, match="line 3"):
        decode(bad_dump, "dump.txt")
