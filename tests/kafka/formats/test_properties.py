"""meta.properties (ZooKeeper and KRaft forms, java.util.Properties syntax) and partition.metadata."""
from __future__ import annotations

from pathlib import Path

import pytest

from audit.errors import PayloadError
from audit.systems.kafka.formats.properties import (encode_meta_properties, encode_partition_metadata, java_date,
                                            load_properties, parse_meta_properties, parse_partition_metadata)

LOGDIR = Path(__file__).parents[2] / "fixtures" / "real" / "kafka-broker-logdir-01"
DIR_ID = "1FGfCa9ySsqZ4fcHwzu0hw"


def test_real_zookeeper_form():
    data = (LOGDIR / "meta.properties").read_bytes()
    assert parse_meta_properties(data, "meta.properties") == {
        "version": 0, "mode": "zookeeper", "broker_id": 0, "cluster_id": "6FP5xR3jTsO5HbmLMGrOBw",
        "directory_id": None}


def test_encoder_matches_the_real_file_but_for_the_date_comment():
    real = (LOGDIR / "meta.properties").read_bytes().split(b"\n")
    ours = encode_meta_properties(version=0, cluster_id="6FP5xR3jTsO5HbmLMGrOBw", broker_id=0,
                                  written_at_ms=1721562701000).split(b"\n")
    assert ours[0] == real[0] == b"#" and ours[2:] == real[2:]
    assert ours[1] == b"#Sun Jul 21 11:51:41 UTC 2024"   # the real one: the same instant in IST


def test_kraft_form_round_trip():
    data = encode_meta_properties(version=1, cluster_id="MkU3OEVBNTcwNTJENDM2Qk", node_id=3, directory_id=DIR_ID)
    assert data == (f"#\n#Thu Jan 01 00:00:00 UTC 1970\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
                    f"directory.id={DIR_ID}\nnode.id=3\nversion=1\n").encode()
    assert parse_meta_properties(data, "m") == {"version": 1, "mode": "kraft", "node_id": 3,
                                                "cluster_id": "MkU3OEVBNTcwNTJENDM2Qk", "directory_id": DIR_ID}


def test_v0_without_version_line_or_broker_id_is_legal():
    assert parse_meta_properties(b"cluster.id=abc\n", "m") == {
        "version": 0, "mode": "zookeeper", "broker_id": None, "cluster_id": "abc", "directory_id": None}


@pytest.mark.parametrize("text, field", [
    ("version=1\ncluster.id=c\n", "node.id"),                 # KRaft form needs node.id
    ("version=1\nnode.id=1\n", "cluster.id"),                 # ... and cluster.id
    ("version=2\nnode.id=1\ncluster.id=c\n", "version"),      # unknown version
    ("version=x\n", "version"),
    ("version=0\nbroker.id=0 \n", "broker.id"),               # parseInt does not trim (the version line is)
    ("version=1\nnode.id=1\ncluster.id=c\ndirectory.id=AAAA\n", "directory.id"),   # 3 bytes, not 16
    ("version=1\nnode.id=1\ncluster.id=c\ndirectory.id=a+b/\n", "directory.id"),   # not URL-safe base64
])
def test_bad_meta_properties_name_the_key(text, field):
    with pytest.raises(PayloadError) as err:
        parse_meta_properties(text.encode(), "brokers/1/dir0/meta.properties")
    assert err.value.source == "brokers/1/dir0/meta.properties" and err.value.field == field


def test_java_properties_syntax():
    text = b"# c\n! c\n  key\\ one = a b \\\n    c\nk2:v2\nk3 v3\nk4\\=x=\\u0041\\t\nk2=last\n"
    assert load_properties(text, "s") == {"key one": "a b c", "k2": "last", "k3": "v3", "k4=x": "A\t"}


def test_malformed_unicode_escape():
    with pytest.raises(PayloadError):
        load_properties(b"k=\\u00zz\n", "s")


def test_real_partition_metadata_and_exact_encoding():
    data = (LOGDIR / "one-0" / "partition.metadata").read_bytes()
    assert parse_partition_metadata(data, "p") == {"version": 0, "topic_id": "0GiFCHgWSn6oW8MZMNOqbg"}
    assert encode_partition_metadata("0GiFCHgWSn6oW8MZMNOqbg") == data


@pytest.mark.parametrize("data, field", [
    (b"", "line 1 version"),
    (b"version 0\ntopic_id: 0GiFCHgWSn6oW8MZMNOqbg", "line 1 version"),
    (b"version: 0\n", "line 2 topic_id"),
    (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "line 2 topic_id"),      # the zero UUID
    (b"version: 0\ntopic_id: 0GiFCHgWSn6oW8MZMNOqbgAAA", "line 2 topic_id"),   # 19 bytes
])
def test_bad_partition_metadata(data, field):
    with pytest.raises(PayloadError) as err:
        parse_partition_metadata(data, "t-0/partition.metadata")
    assert err.value.field == field


def test_newer_partition_metadata_version_is_read():
    assert parse_partition_metadata(b"version: 1\ntopic_id: 0GiFCHgWSn6oW8MZMNOqbg\n", "p")["version"] == 1


def test_java_date():
    assert java_date(1_709_287_200_123) == "Fri Mar 01 10:00:00 UTC 2024"
