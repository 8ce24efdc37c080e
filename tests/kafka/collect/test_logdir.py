"""The log-dir scanner: byte-for-byte copies, the batch-header index, a broker still writing, broken input."""
import json
import os
import shutil
import struct
import threading
from pathlib import Path

import pytest

from audit.systems.kafka.collect.logdir import BrokerIdMismatch, partition_dir_kind, scan_log_dir, scan_log_dirs
from tests.kafka.collect.build import batches, segment_name, standard_log_dir, tree, write_log_dir, \
    write_partition

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real" / "kafka-broker-logdir-01"


class Store(dict):
    def put(self, key, data):
        assert key not in self, f"{key} written twice"
        self[key] = bytes(data)

    def json(self, key):
        return json.loads(self[key])


def segment(store, key, file):
    return next(s for s in store.json(key)["segments"] if s["file"] == file)


def test_real_broker_log_dir_scans_cleanly_and_copies_byte_for_byte():
    store = Store()
    result = scan_log_dir(str(REAL), 0, store.put, verify_crc=True)
    scan = store.json("brokers/0/dir0/scan.json")
    assert result.gaps == [] and scan["errors"] == [] and scan["vanished"] == [] and scan["skipped"] == []
    assert scan["broker"] == 0 and scan["log_dir"] == str(REAL) and scan["verify_crc"] is True
    assert scan["started_at_ms"] <= scan["checkpoints_read_at_ms"] <= scan["listed_at_ms"] <= scan["finished_at_ms"]
    on_disk = tree(REAL)
    partitions = sorted({k.split("/")[0] for k in on_disk if "/" in k})
    assert scan["partitions"] == partitions and len(partitions) == 51
    copied = {k.removeprefix("brokers/0/dir0/"): v for k, v in store.items()
              if not k.endswith(("batches.json", "scan.json"))}
    expected = {k: v for k, v in on_disk.items() if not k.endswith(".log") and k != ".lock"}   # the broker's lock
    # every checkpoint and partition file, the 0-byte one too, and the cleaner's checkpoint again after the segments
    assert copied == {**expected, "cleaner-offset-checkpoint.after-segments": expected["cleaner-offset-checkpoint"]}
    assert copied["cleaner-offset-checkpoint"] == b""
    one = segment(store, "brokers/0/dir0/one-0/batches.json", "00000000000000000000.log")
    b = one["batches"]
    assert len(b["base_offset"]) == 11 and set(b["crc_valid"]) == {True} and set(b["magic"]) == {2}
    assert one["read_bytes"] == one["size_at_start"] == 924 and one["tail"] is None and one["active"] is True
    assert b["position"][0] == 0 and all(p + s == n for p, s, n in zip(b["position"], b["size"], b["position"][1:]))
    assert result.counts["batches_crc_invalid"] == 0 and result.counts["partitions_indexed"] == 51


def test_index_columns_tails_and_legacy_message_sets(tmp_path):
    standard_log_dir(tmp_path / "d", broker=1)
    store = Store()
    result = scan_log_dir(str(tmp_path / "d"), 1, store.put)
    assert result.scan["errors"] == [] and result.gaps == []
    rolled = segment(store, "brokers/1/dir0/orders-0/batches.json", segment_name(0))
    active = segment(store, "brokers/1/dir0/orders-0/batches.json", segment_name(6))
    assert (rolled["active"], active["active"]) == (False, True)
    assert rolled["batches"]["base_offset"] == [0, 2, 4] and rolled["batches"]["last_offset"] == [1, 3, 5]
    assert active["batches"]["partition_leader_epoch"] == [2, 2] and active["base_offset"] == 6
    assert rolled["batches"]["crc_valid"] == [None] * 3          # not verified unless asked
    growing = segment(store, "brokers/1/dir0/orders-1/batches.json", segment_name(0))
    assert (growing["tail"] == {"offset": 210, "why": growing["tail"]["why"]}
            and "partial batch" in growing["tail"]["why"])
    assert growing["error"] is None and growing["read_bytes"] == 210 and growing["size_at_start"] == 250
    legacy = segment(store, "brokers/1/dir0/legacy-0/batches.json", segment_name(0))["batches"]
    assert legacy["magic"] == [1, 0] and legacy["partition_leader_epoch"] == [-1, -1]
    assert legacy["base_offset"] == legacy["last_offset"] == [0, 1] and legacy["producer_id"] == [-1, -1]
    assert store["brokers/1/dir0/orders-0/leader-epoch-checkpoint"] == b"0\n2\n0 0\n2 6\n"
    assert "brokers/1/dir0/legacy-0/leader-epoch-checkpoint" not in store
    assert result.counts["active_tails"] == 1 and result.counts["batches_indexed"] == 9


def test_broken_input_is_named_by_file_and_offset_and_the_scan_goes_on(tmp_path):
    d = standard_log_dir(tmp_path / "d", broker=1)
    good = batches(0, 2, 3)
    bad_magic = bytearray(batches(4, 1, 3))
    bad_magic[16] = 7
    write_partition(d, "bad-0", {0: good + bytes(bad_magic) + batches(6, 1, 3)}, [(3, 0)])
    flipped = bytearray(batches(0, 2, 0))
    flipped[-1] ^= 0xFF                                         # payload byte: only the CRC notices
    write_partition(d, "crc-0", {0: bytes(flipped)}, [(0, 0)])
    write_partition(d, "cut-0", {0: batches(0, 2, 0)[:150], 4: batches(4, 1, 0)}, [(0, 0)])
    (d / "lying-0").mkdir()
    (d / "lying-0" / "leader-epoch-checkpoint").write_bytes(b"0\n3\n0 0\n1 5\n")   # the count line lies
    store = Store()
    result = scan_log_dir(str(d), 1, store.put, verify_crc=True)
    errors = {(e["file"], e["offset"]): e["error"] for e in result.scan["errors"]}
    assert "magic 0, 1 or 2" in errors[("bad-0/" + segment_name(0), 210)]
    assert "bad-0/00000000000000000000.log" in errors[("bad-0/" + segment_name(0), 210)]
    assert "partial batch in a rolled" in errors[("cut-0/" + segment_name(0), 105)]
    assert "entry count" in errors[("lying-0/leader-epoch-checkpoint", None)]
    bad = segment(store, "brokers/1/dir0/bad-0/batches.json", segment_name(0))
    assert bad["batches"]["base_offset"] == [0, 2] and bad["error"]["offset"] == 210
    crc = segment(store, "brokers/1/dir0/crc-0/batches.json", segment_name(0))["batches"]
    assert crc["crc_valid"] == [True, False] and crc["base_offset"] == [0, 2]
    assert result.counts["batches_crc_invalid"] == 1
    # the bad CRC is named by file, the batch's position and its base offset; the batch stays indexed
    crc_error = errors[("crc-0/" + segment_name(0), crc["position"][1])]
    assert "crc-0/00000000000000000000.log" in crc_error and "base offset 2" in crc_error and "CRC-32C" in crc_error
    assert crc["position"][1] > 0 and len(result.scan["errors"]) == result.counts["errors"] == 4
    # the other partitions are indexed as if nothing happened; the broken segment is a coverage gap
    assert segment(store, "brokers/1/dir0/orders-0/batches.json", segment_name(6))["batches"]["base_offset"] == [6, 8]
    assert [g.what for g in result.gaps] == ["segment batches"] and result.gaps[0].source.endswith("@210")
    assert store["brokers/1/dir0/lying-0/leader-epoch-checkpoint"] == b"0\n3\n0 0\n1 5\n"   # still the evidence


def test_special_and_foreign_dirs_are_skipped_not_indexed(tmp_path):
    d = standard_log_dir(tmp_path / "d")
    for name in ("orders-0.5a2b7c-future", "orders-3.a1b2c3-delete", "orders-2.ff00-stray", "lost+found",
                 "not_a_partition", "t-x"):
        write_partition(d, name, {0: batches(0, 1, 0)}, [(0, 0)])
    store = Store()
    scan = scan_log_dir(str(d), 1, store.put).scan
    why = {s["dir"]: s["why"] for s in scan["skipped"]}
    assert why["orders-0.5a2b7c-future"].startswith("future replica")
    assert why["orders-3.a1b2c3-delete"] == "marked for deletion" and why["orders-2.ff00-stray"].startswith("stray")
    assert {why["lost+found"], why["not_a_partition"], why["t-x"]} == {"not a partition dir (<topic>-<partition>)"}
    assert not any(k.split("/")[3] in why for k in store if k.count("/") > 3)
    assert partition_dir_kind("__cluster_metadata-0") is None and partition_dir_kind("a-b-c-17") is None


def test_a_broker_still_writing(tmp_path):
    """A writer thread appends to the active segments (a whole batch and half of another), rolls a new segment
    and deletes the oldest segment of another partition while the scan runs: the scan reads what the listing saw."""
    d = write_log_dir(tmp_path / "d", 1, [("a", 0, 6), ("b", 0, 6)])
    write_partition(d, "a-0", {0: batches(0, 3, 0)}, [(0, 0)])
    write_partition(d, "b-0", {0: batches(0, 3, 0), 6: batches(6, 3, 0)}, [(0, 0)])
    listed_a = (d / "a-0" / segment_name(0)).stat().st_size
    first_put, written = threading.Event(), threading.Event()

    def broker():
        first_put.wait(timeout=30)
        with open(d / "a-0" / segment_name(0), "ab") as f:
            f.write(batches(6, 1, 1) + batches(8, 1, 1)[:30])
        (d / "a-0" / segment_name(10)).write_bytes(batches(10, 1, 1))       # rolled after the listing
        os.unlink(d / "b-0" / segment_name(0))                              # retention
        written.set()

    def put(key, data):
        store.put(key, data)
        if key.endswith("/a-0/leader-epoch-checkpoint") and not first_put.is_set():
            first_put.set()                   # the listing is taken; let the broker write, then go on
            assert written.wait(timeout=30)

    store = Store()
    writer = threading.Thread(target=broker)
    writer.start()
    try:
        result = scan_log_dir(str(d), 1, put)
    finally:
        first_put.set()
        writer.join(timeout=30)
    a = store.json("brokers/1/dir0/a-0/batches.json")["segments"]
    assert [s["file"] for s in a] == [segment_name(0)]                     # the new segment was not listed
    assert a[0]["size_at_start"] == a[0]["read_bytes"] == listed_a and a[0]["tail"] is None
    assert a[0]["batches"]["base_offset"] == [0, 2, 4]
    b = store.json("brokers/1/dir0/b-0/batches.json")["segments"]
    assert (b[0]["vanished"] is True and b[0]["batches"]["base_offset"] == []
            and b[1]["batches"]["base_offset"] == [6, 8, 10])
    assert result.scan["vanished"] == [{"file": "b-0/" + segment_name(0), "why": result.scan["vanished"][0]["why"]}]
    assert result.scan["errors"] == [] and result.gaps == [] and result.counts["segments_vanished"] == 1


def test_the_broker_id_is_checked_before_anything_is_written(tmp_path):
    zk = write_log_dir(tmp_path / "zk", 2, [])
    kraft = write_log_dir(tmp_path / "kraft", 5, [], kraft=True)
    store = Store()
    with pytest.raises(BrokerIdMismatch) as e:
        scan_log_dir(str(zk), 1, store.put)
    assert (e.value.given, e.value.found, e.value.key) == (1, 2, "broker.id") and store == {}
    with pytest.raises(BrokerIdMismatch) as e:
        scan_log_dir(str(kraft), 4, store.put)
    assert (e.value.found, e.value.key) == (5, "node.id") and store == {}
    assert scan_log_dir(str(zk), 1, store.put, check_broker=False).scan["broker"] == 1


def test_kraft_metadata_partition_is_copied_byte_for_byte(tmp_path):
    d = write_log_dir(tmp_path / "d", 3, [], kraft=True)
    meta = write_partition(d, "__cluster_metadata-0", {0: batches(0, 2, 1), 4: batches(4, 1, 2) + b"\x00" * 20},
                           [(1, 0), (2, 4)])
    (meta / "00000000000000000004-0000000002.checkpoint").write_bytes(batches(0, 1, 2))
    (meta / "quorum-state").write_bytes(b'{"leaderId":3,"leaderEpoch":2,"votedId":-1,"data_version":0}')
    (meta / "00000000000000000000.snapshot").write_bytes(b"producer state, not copied")
    store = Store()
    scan_log_dir(str(d), 3, store.put)
    p = "brokers/3/dir0/__cluster_metadata-0/"
    assert store[p + segment_name(0)] == (meta / segment_name(0)).read_bytes()
    assert store[p + segment_name(4)] == batches(4, 1, 2)             # less the unwritten (zero) tail
    assert store[p + "00000000000000000004-0000000002.checkpoint"] == batches(0, 1, 2)
    assert store[p + "quorum-state"].startswith(b'{"leaderId":3')
    assert p + "00000000000000000000.snapshot" not in store
    assert segment(store, p + "batches.json", segment_name(4))["tail"]["why"].startswith("zero bytes")


def test_several_dirs_of_one_broker_and_a_missing_one(tmp_path):
    a = standard_log_dir(tmp_path / "a", broker=7)
    b = write_log_dir(tmp_path / "b", 7, [("t", 0, 2)])
    write_partition(b, "t-0", {0: batches(0, 1, 4)}, [(4, 0)])
    store = Store()
    results = scan_log_dirs([str(a), str(b), str(tmp_path / "gone")], 7, store.put)
    assert store.json("brokers/7/dir0/scan.json")["log_dir"] == str(a)
    assert store.json("brokers/7/dir1/scan.json")["partitions"] == ["t-0"]
    assert "brokers/7/dir2/scan.json" not in store
    assert results[2].gaps[0].source == str(tmp_path / "gone") and results[2].counts == {"log_dirs_missing": 1}


def test_a_segment_that_cannot_be_read_is_a_gap(tmp_path):
    """Listed as a file, then not readable when its turn comes (a directory now: unreadable even for root)."""
    d = standard_log_dir(tmp_path / "d")
    store = Store()

    def put(key, data):
        store.put(key, data)
        if key.endswith("/orders-0/leader-epoch-checkpoint"):
            os.unlink(d / "orders-0" / segment_name(0))
            os.mkdir(d / "orders-0" / segment_name(0))

    result = scan_log_dir(str(d), 1, put)
    rolled = segment(store, "brokers/1/dir0/orders-0/batches.json", segment_name(0))
    assert rolled["error"]["error"].startswith("not readable") and rolled["batches"]["base_offset"] == []
    assert [(e["file"], e["offset"]) for e in result.scan["errors"]] == [("orders-0/" + segment_name(0), 0)]
    assert [(g.what, g.source) for g in result.gaps] == [("segment", str(d / "orders-0" / segment_name(0)))]
    assert segment(store, "brokers/1/dir0/orders-0/batches.json", segment_name(6))["batches"]["base_offset"] == [6, 8]


def test_scan_speed_smoke(tmp_path):
    """Headers only: a 16 MiB segment of 16 KiB batches is indexed without reading its payloads."""
    d = write_log_dir(tmp_path / "d", 1, [])
    one = bytearray(batches(0, 1, 0, per_batch=16, size=1000))
    n = (16 << 20) // len(one)
    data = bytearray()
    for i in range(n):
        struct.pack_into(">q", one, 0, i * 16)
        data += one
    write_partition(d, "big-0", {0: bytes(data)}, [(0, 0)])
    store = Store()
    result = scan_log_dir(str(d), 1, store.put)
    assert result.counts["batches_indexed"] == n and result.counts["segment_bytes_read"] == len(data)
    shutil.rmtree(d)


def test_an_incident_check_skips_the_partition_dirs_it_does_not_want(tmp_path, monkeypatch):
    from audit.contracts import Scope

    d = standard_log_dir(tmp_path / "d", broker=1)
    write_partition(d, "__cluster_metadata-0", {0: batches(0, 1, 1)}, [(1, 0)])
    opened = []
    real_scandir = os.scandir

    def scandir(path):            # which partition dirs were listed at all
        opened.append(os.path.basename(os.fspath(path)))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    store = Store()
    result = scan_log_dir(str(d), 1, store.put, scope=Scope(subjects=("orders-1",)))
    scan = result.scan
    # only orders-1 (by its partition name) and the cluster's metadata log are read; orders-0 and legacy-0 are
    # named in scan.json as not in scope, neither listed nor read, and are not gaps
    assert scan["partitions"] == ["__cluster_metadata-0", "orders-1"]
    assert {"dir": "orders-0", "why": "not in scope"} in scan["skipped"]
    assert {"dir": "legacy-0", "why": "not in scope"} in scan["skipped"]
    assert "orders-0" not in opened and "legacy-0" not in opened and "orders-1" in opened
    assert not any(k.startswith(("brokers/1/dir0/orders-0/", "brokers/1/dir0/legacy-0/")) for k in store)
    assert "brokers/1/dir0/orders-1/batches.json" in store
    assert result.gaps == []
    assert result.counts["partition_dirs_not_in_scope"] == 2 and result.counts["partition_dirs_skipped"] == 0
    assert result.counts["partitions_indexed"] == 2
    # the dir's own files list every partition: evidence byte for byte, kept whole
    for name in ("meta.properties", "replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                 "log-start-offset-checkpoint", "cleaner-offset-checkpoint"):
        assert store[f"brokers/1/dir0/{name}"] == (d / name).read_bytes()
    # a topic pattern wants every partition of the topic; no subject: everything
    both = Store()
    assert scan_log_dir(str(d), 1, both.put, scope=Scope(subjects=("ord*",))).scan["partitions"] == [
        "__cluster_metadata-0", "orders-0", "orders-1"]
    whole = Store()
    assert "partition_dirs_not_in_scope" not in scan_log_dir(str(d), 1, whole.put, scope=Scope()).counts
