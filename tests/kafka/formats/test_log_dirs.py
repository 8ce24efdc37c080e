"""kafka-log-dirs --describe output (real, both key orders, error values) and the DescribeLogDirs toString."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit.errors import PayloadError
from audit.systems.kafka.formats.log_dirs import (decode_log_dirs_json, looks_like_log_dir_info, looks_like_log_dirs,
                                          parse_log_dir_info_text, parse_log_dirs, split_topic_partition)

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
BANNER = "Querying brokers for log directories information\nReceived log directory information from brokers 1,2\n"


def test_real_output_scala_key_order():
    out = parse_log_dirs((REAL / "kafka-log-dirs-01.txt").read_bytes(), "kafka-log-dirs-01.txt")
    assert out["brokers_queried"] == [0] and out["other_lines"] == []
    (broker,) = out["brokers"]
    assert broker["broker"] == 0
    (d,) = broker["log_dirs"]
    assert (d["log_dir"], d["error"]) == ("/var/snap/charmed-kafka/common/var/lib/kafka/data/0", None)
    assert [(p["topic"], p["partition"], p["size"], p["offset_lag"], p["is_future"]) for p in d["partitions"]] == [
        ("NEW-TOPIC-2", 4, 394, 0, False), ("NEW-TOPIC-2", 3, 394, 0, False), ("NEW-TOPIC-2", 2, 392, 0, False),
        ("NEW-TOPIC-2", 1, 392, 0, False), ("NEW-TOPIC-2", 0, 393, 0, False)]


def test_java_port_key_order_offline_dir_and_future_replica():
    # the HashMap order LogDirsCommand.java (3.6+) produces, an offline dir, a future replica and lag -1
    line = ('{"brokers":[{"logDirs":[{"partitions":[{"isFuture":false,"offsetLag":-1,"partition":"a-b-7",'
            '"size":10},{"size":12,"offsetLag":3,"isFuture":true,"partition":"a-b-7"}],"error":null,"logDir":"/d1"},'
            '{"partitions":[],"error":"org.apache.kafka.common.errors.KafkaStorageException","logDir":"/d2"}],'
            '"broker":1},{"logDirs":[],"broker":2}],"version":1}')
    out = parse_log_dirs("$ bin/kafka-log-dirs.sh --describe --bootstrap-server b:9092\n" + BANNER + line, "o.txt")
    assert out["brokers_queried"] == [1, 2]
    assert out["other_lines"] == [{"line": 1, "text": "$ bin/kafka-log-dirs.sh --describe --bootstrap-server b:9092"}]
    b1, b2 = out["brokers"]
    d1, d2 = b1["log_dirs"]
    assert d1["partitions"] == [
        {"topic": "a-b", "partition": 7, "size": 10, "offset_lag": -1, "is_future": False},
        {"topic": "a-b", "partition": 7, "size": 12, "offset_lag": 3, "is_future": True}]
    assert (d2["error"], d2["partitions"]) == ("org.apache.kafka.common.errors.KafkaStorageException", [])
    assert b2 == {"broker": 2, "log_dirs": []}


def test_missing_brokers_error_line():
    out = parse_log_dirs("ERROR: The given brokers do not exist from --broker-list: 5,6. Current existent brokers: "
                         "1,2\n", "o.txt")
    assert (out["missing_brokers"], out["existing_brokers"], out["brokers"]) == ([5, 6], [1, 2], [])


@pytest.mark.parametrize("text, field, expected", [
    (BANNER, "json", "exactly one JSON line"),
    (BANNER + '{"version":1,"brokers":[\n', "line 3", "JSON"),
    (BANNER + '{"version":2,"brokers":[]}', "json", '"version": 1'),
    (BANNER + '{"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/d","error":null,"partitions":'
              '[{"partition":"nodash","size":1,"offsetLag":0,"isFuture":false}]}]}]}',
     "json.brokers[0].logDirs[0].partitions[0].partition", "<topic>-<partition>"),
    (BANNER + '{"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/d","error":null,"partitions":'
              '[{"partition":"t-0","size":"1","offsetLag":0,"isFuture":false}]}]}]}',
     "json.brokers[0].logDirs[0].partitions[0].size", "int"),
    (BANNER + '{"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/d","error":null,"partitions":'
              '[{"partition":"t-0","size":1,"isFuture":false}]}]}]}',
     "json.brokers[0].logDirs[0].partitions[0].offsetLag", "present"),
])
def test_bad_output(text, field, expected):
    with pytest.raises(PayloadError) as e:
        parse_log_dirs(text, "o.txt")
    assert (e.value.source, e.value.field) == ("o.txt", field) and expected in e.value.expected


def test_decode_json_document_directly():
    doc = {"version": 1, "brokers": [{"broker": 3, "logDirs": [{"logDir": "/x", "error": None, "partitions": []}]}]}
    assert decode_log_dirs_json(json.loads(json.dumps(doc)), "d") == [
        {"broker": 3, "log_dirs": [{"log_dir": "/x", "error": None, "partitions": []}]}]


def test_real_describe_log_dirs_debug_fragment():
    out = parse_log_dir_info_text((REAL / "kafka-describe-logdirs-02.fragment.txt").read_bytes(), "frag.txt")
    assert (out["log_dir"], out["error"], out["truncated"]) == ("/tmp/kafka-logs/server0", None, True)
    got = [f"{r['topic']}-{r['partition']}:{r['offset_lag']}" for r in out["replicas"]]
    assert got == [  # in the map's order; test-114 is the entry the log viewer wrapped inside "false"
        "tst-53:-1", "tst-86:-1", "tst-20:-1", "test-32:0", "tst-111:-1", "test-98:0", "tst-45:-1", "tst-78:-1",
        "tst-12:-1", "test-24:0", "tst-103:-1", "test-90:0", "tst-37:-1", "tst-70:-1", "tst-4:-1", "test-48:0",
        "tst-95:-1", "test-114:0", "tst-29:-1", "tst-62:-1", "test-40:0", "tst-87:-1", "test-106:0", "tst-120:-1",
        "tst-21:-1"]
    assert all(r["size"] == 0 and r["is_future"] is False for r in out["replicas"])


def test_log_dir_description_to_string():
    text = ("LogDirDescription(replicaInfos={t-1=ReplicaInfo(size=5, offsetLag=2, isFuture=true)}, "
            "error=org.apache.kafka.common.errors.KafkaStorageException: disk failed, totalBytes=OptionalLong.empty, "
            "usableBytes=OptionalLong.empty)")
    assert parse_log_dir_info_text(text, "x") == {
        "log_dir": None, "error": "org.apache.kafka.common.errors.KafkaStorageException", "truncated": False,
        "replicas": [{"topic": "t", "partition": 1, "size": 5, "offset_lag": 2, "is_future": True}]}
    assert parse_log_dir_info_text("/d(error=KAFKA_STORAGE_ERROR, replicas={})", "x")["error"] == \
        "KAFKA_STORAGE_ERROR"
    with pytest.raises(PayloadError, match="replicas"):
        parse_log_dir_info_text("nothing here", "x")


def test_helpers():
    assert split_topic_partition("my-topic-12", "s", "f") == ("my-topic", 12)
    with pytest.raises(PayloadError):
        split_topic_partition("-3", "s", "f")
    assert looks_like_log_dirs((REAL / "kafka-log-dirs-01.txt").read_text())
    assert looks_like_log_dir_info((REAL / "kafka-describe-logdirs-02.fragment.txt").read_text())
    assert not looks_like_log_dirs("Dumping x.log\n")
