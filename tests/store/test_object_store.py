"""The same contract for LocalStore and S3Store (S3 = moto's server over HTTP on loopback)."""
import os

import pytest

from audit.store import InvalidKey, ObjectNotFound, StoreError, open_store
from audit.store.local import TMP_PREFIX, LocalStore
from audit.store.s3 import S3Store
from tests.s3fixture import STORE_CREDENTIALS, open_s3_store, s3_client


def test_put_get_roundtrip_and_overwrite(store):
    payload = bytes(range(256)) * 3
    store.put("a/b/c.bin", payload)
    assert store.get("a/b/c.bin") == payload
    store.put("a/b/c.bin", b"second")
    assert store.get("a/b/c.bin") == b"second"


def test_get_missing_raises_object_not_found_naming_key(store):
    with pytest.raises(ObjectNotFound) as info:
        store.get("nope/missing.json")
    assert info.value.key == "nope/missing.json"
    assert "nope/missing.json" in str(info.value) and store.uri in str(info.value)
    assert isinstance(info.value, KeyError)


def test_exists(store):
    store.put("x/y.txt", b"1")
    assert store.exists("x/y.txt")
    assert not store.exists("x/y")  # a folder is not an object
    assert not store.exists("x/z.txt")


def test_list_is_a_sorted_string_prefix_match(store):
    for key in ["r/2/b", "r/1/a", "r/10/c", "rx/d", "s/e", "r/1/.hidden.crc"]:
        store.put(key, key.encode())
    assert list(store.list("r/")) == ["r/1/.hidden.crc", "r/1/a", "r/10/c", "r/2/b"]
    assert list(store.list("r/1")) == ["r/1/.hidden.crc", "r/1/a", "r/10/c"]
    assert list(store.list("r")) == ["r/1/.hidden.crc", "r/1/a", "r/10/c", "r/2/b", "rx/d"]
    assert list(store.list("")) == ["r/1/.hidden.crc", "r/1/a", "r/10/c", "r/2/b", "rx/d", "s/e"]
    assert list(store.list("absent/")) == []


def test_list_prefixes_gives_immediate_subfolders(store):
    for key in ["e/runs/r2/manifest.json", "e/runs/r1/attempts/a/x", "e/runs/top.json", "e/other/z"]:
        store.put(key, b"")
    assert list(store.list_prefixes("e/runs")) == ["r1", "r2"]
    assert list(store.list_prefixes("e/runs/")) == ["r1", "r2"]
    assert list(store.list_prefixes("e")) == ["other", "runs"]
    assert list(store.list_prefixes("missing")) == []


def test_delete_is_idempotent(store):
    for key in ["d/1", "d/2", "d/sub/3", "keep/4"]:
        store.put(key, b"x")
    assert store.delete(["d/1", "d/sub/3", "d/never-existed"]) == 3
    assert list(store.list("")) == ["d/2", "keep/4"]
    store.delete([])
    assert list(store.list("")) == ["d/2", "keep/4"]


def test_delete_many_keys_in_batches(store):
    keys = [f"many/{i:05d}" for i in range(1005)]  # S3 DeleteObjects takes 1000 at most
    for key in keys:
        store.put(key, b"")
    store.delete(keys)
    assert list(store.list("many/")) == []


def test_upload_dir_and_download_prefix_roundtrip(store, tmp_path):
    src = tmp_path / "src"
    (src / "part=1").mkdir(parents=True)
    (src / "part=1" / "data.parquet").write_bytes(b"PAR1" + os.urandom(100))
    (src / "_SUCCESS").write_bytes(b"")
    keys = store.upload_dir(src, "run/tables/t/")
    assert keys == ["run/tables/t/_SUCCESS", "run/tables/t/part=1/data.parquet"]
    dst = tmp_path / "dst"
    paths = store.download_prefix("run/tables/t", dst)
    assert sorted(p.relative_to(dst).as_posix() for p in paths) == ["_SUCCESS", "part=1/data.parquet"]
    assert (dst / "part=1" / "data.parquet").read_bytes() == (src / "part=1" / "data.parquet").read_bytes()


def test_large_file_roundtrip(store, tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(11 * 1024 * 1024))
    store.upload_file(big, "big/big.bin")
    out = tmp_path / "out.bin"
    store.download_file("big/big.bin", out)
    assert out.read_bytes() == big.read_bytes()


@pytest.mark.parametrize("key", ["", "/abs", "a//b", "a/../b", "./a", "a/", "a\\b"])
def test_invalid_keys_are_rejected(store, key):
    with pytest.raises(InvalidKey):
        store.put(key, b"x")


def test_prefix_escaping_the_store_is_rejected(store):
    with pytest.raises(InvalidKey):
        list(store.list("../"))


def test_s3_multipart_upload_above_threshold(s3_endpoint, s3_bucket, tmp_path):
    mb = 1024 * 1024
    store = S3Store(s3_bucket, "p", endpoint_url=s3_endpoint, region="us-east-1",
                    credentials=STORE_CREDENTIALS, multipart_threshold=5 * mb, multipart_chunksize=5 * mb)
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(11 * mb))
    store.upload_file(big, "big.bin")
    head = s3_client(s3_endpoint).head_object(Bucket=s3_bucket, Key="p/big.bin")
    assert head["ETag"].strip('"').endswith("-3")  # a multipart ETag names its part count
    assert store.get("big.bin") == big.read_bytes()


def test_s3_keys_live_under_the_uri_prefix(s3_endpoint, s3_bucket):
    store = open_s3_store(s3_endpoint, f"s3://{s3_bucket}/a/b/")
    store.put("k/1", b"v")
    raw = s3_client(s3_endpoint).list_objects_v2(Bucket=s3_bucket)
    assert [o["Key"] for o in raw["Contents"]] == ["a/b/k/1"]
    assert list(store.list("")) == ["k/1"]


def test_s3_missing_bucket_is_a_store_error(s3_endpoint):
    store = open_s3_store(s3_endpoint, "s3://no-such-bucket-here")
    with pytest.raises(StoreError) as info:
        store.put("k", b"v")
    assert "s3://no-such-bucket-here" in str(info.value) and "NoSuchBucket" in str(info.value)


def test_local_put_failure_keeps_old_object_and_leaves_no_temp_file(tmp_path):
    store = LocalStore(tmp_path)
    store.put("a/obj", b"old")
    with pytest.raises(TypeError):
        store.put("a/obj", "not bytes")  # fails inside the write, after the temp file exists
    assert store.get("a/obj") == b"old"
    assert os.listdir(tmp_path / "a") == ["obj"]


def test_local_half_written_temp_files_are_invisible(tmp_path):
    store = LocalStore(tmp_path)
    store.put("a/obj", b"x")
    (tmp_path / "a" / f"{TMP_PREFIX}abc").write_bytes(b"partial")  # as a killed writer leaves it
    assert list(store.list("")) == ["a/obj"]
    with pytest.raises(StoreError):
        store.put(f"a/{TMP_PREFIX}x", b"x")


def test_local_delete_prunes_empty_folders(tmp_path):
    store = LocalStore(tmp_path / "root")
    store.put("e/runs/r/attempts/a1/raw/x", b"x")
    store.delete(["e/runs/r/attempts/a1/raw/x"])
    assert list((tmp_path / "root").iterdir()) == []


def test_open_store_rejects_other_schemes():
    with pytest.raises(StoreError, match="file://"):
        open_store("gs://bucket/x")
    with pytest.raises(StoreError, match="only apply to s3"):
        open_store("file:///tmp/x", credentials={"access_key": "a", "secret_key": "b"})
