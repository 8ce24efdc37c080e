"""librdkafka's built-in mock cluster (bundled in the confluent-kafka wheel), driven through its C API with ctypes
(the bundled librdkafka's exported rd_kafka_mock_* symbols): brokers on loopback, topics created with
rd_kafka_mock_topic_create (the mock does not serve CreateTopics). Clients connect to `bootstraps` like to any cluster.

    with MockCluster(brokers=3) as mc:
        mc.create_topic("t", partitions=2)
        mc.produce("t", [(key, value)], partition=0)"""
from __future__ import annotations

import ctypes
import glob
import logging
import os

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition

_LIB = None
QUIET = logging.getLogger("tests.mock-cluster")
QUIET.setLevel(logging.CRITICAL)        # librdkafka's "Disconnected" notices when the mock stops


def _lib():
    global _LIB
    if _LIB is None:
        libs = os.path.join(os.path.dirname(confluent_kafka.__file__), "..", "confluent_kafka.libs")
        lib = ctypes.CDLL(sorted(glob.glob(os.path.join(libs, "librdkafka*.so*")))[0])
        lib.rd_kafka_conf_new.restype = ctypes.c_void_p
        lib.rd_kafka_conf_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                          ctypes.c_size_t]
        lib.rd_kafka_new.restype = ctypes.c_void_p
        lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
        lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
        lib.rd_kafka_mock_broker_set_down.argtypes = [ctypes.c_void_p, ctypes.c_int32]
        _LIB = lib
    return _LIB


class MockCluster:
    def __init__(self, brokers: int = 3):
        self.brokers = brokers
        self._rk = self._mc = None
        self.bootstraps = ""

    def __enter__(self) -> "MockCluster":
        lib = _lib()
        err = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        # the handle only hosts the mock: no bootstrap needed, and its own warnings are noise
        lib.rd_kafka_conf_set(conf, b"log_level", b"0", err, 512)
        self._rk = lib.rd_kafka_new(0, conf, err, 512)
        if not self._rk:
            raise RuntimeError(f"rd_kafka_new: {err.value.decode()}")
        self._mc = lib.rd_kafka_mock_cluster_new(self._rk, self.brokers)
        if not self._mc:
            lib.rd_kafka_destroy(self._rk)
            raise RuntimeError("rd_kafka_mock_cluster_new failed")
        self.bootstraps = lib.rd_kafka_mock_cluster_bootstraps(self._mc).decode()
        return self

    def __exit__(self, *exc) -> None:
        lib = _lib()
        if self._mc:
            lib.rd_kafka_mock_cluster_destroy(self._mc)
            self._mc = None
        if self._rk:
            lib.rd_kafka_destroy(self._rk)
            self._rk = None

    def create_topic(self, topic: str, partitions: int = 1, replication: int = 3) -> None:
        code = _lib().rd_kafka_mock_topic_create(self._mc, topic.encode(), partitions, replication)
        if code != 0:
            raise RuntimeError(f"rd_kafka_mock_topic_create({topic}): error {code}")

    def produce(self, topic: str, records: list[tuple[bytes | None, bytes | None]], partition: int = 0) -> None:
        p = Producer({"bootstrap.servers": self.bootstraps, "log_level": 3, "linger.ms": 0,
                      "topic.metadata.refresh.fast.interval.ms": 10, "retry.backoff.ms": 10,
                      "reconnect.backoff.ms": 10}, logger=QUIET)
        for key, value in records:
            p.produce(topic, key=key, value=value, partition=partition)
        left = p.flush(10)
        if left:
            raise RuntimeError(f"{left} records not delivered to the mock cluster")

    def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        c = Consumer({"bootstrap.servers": self.bootstraps, "group.id": group, "enable.auto.commit": False,
                      "log_level": 3}, logger=QUIET)
        try:
            c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
        finally:
            c.close()
