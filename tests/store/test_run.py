"""Runs: attempt prefixes, manifest published last, reruns replace, crashes leave the old run intact."""
import hashlib
import json
from datetime import datetime, timezone

import pytest

from audit.store.run import ManifestError, RunWriter, latest_run, list_runs, manifest_key, read_manifest
from audit.store.staging import LocalStaging
from tests.s3fixture import open_s3_store


def _write_attempt(store, run_id, attempt_id, files):
    writer = RunWriter(store, "lab", run_id, attempt_id)
    for (area, rel), data in files.items():
        writer.put(area, rel, data)
    return writer


def test_keys_follow_the_contract_layout(store):
    writer = RunWriter(store, "lab", "manual__2025-01-01T00:00:00+00:00", "a1")
    assert writer.key("raw", "bookkeeper", "bk-lab", "ledger-metadata/00/0000/L0001") == \
        "lab/runs/manual__2025-01-01T00:00:00+00:00/attempts/a1/raw/bookkeeper/bk-lab/ledger-metadata/00/0000/L0001"
    assert writer.key("tables") == "lab/runs/manual__2025-01-01T00:00:00+00:00/attempts/a1/tables"
    with pytest.raises(ValueError, match="area: expected one of raw, tables"):
        writer.key("scratch", "x")
    with pytest.raises(ValueError, match="run_id"):
        RunWriter(store, "lab", "../escape")
    with pytest.raises(ValueError, match="estate"):
        RunWriter(store, "Not An Estate", "r1")


def test_default_attempt_ids_are_unique_and_sortable(store):
    a, b = RunWriter(store, "lab", "r").attempt_id, RunWriter(store, "lab", "r").attempt_id
    assert a != b
    assert a[:8].isdigit()


def test_sink_writes_below_its_folder(store):
    writer = RunWriter(store, "lab", "r1", "a1")
    sink = writer.sink("raw", "bookkeeper", "bk-lab")
    key = sink.put("bookies/available.json", b"{}")
    assert key == "lab/runs/r1/attempts/a1/raw/bookkeeper/bk-lab/bookies/available.json"
    assert store.get(key) == b"{}"


def test_run_is_invisible_until_manifest_is_published(store):
    writer = _write_attempt(store, "r1", "a1", {("raw", "x.bin"): b"x", ("tables", "t/part-0"): b"t"})
    assert read_manifest(store, "lab", "r1") is None
    assert list_runs(store, "lab") == []
    assert latest_run(store, "lab") is None
    writer.publish({"violations": 0})
    assert [r.run_id for r in list_runs(store, "lab")] == ["r1"]


def test_manifest_lists_every_object_with_size_and_sha256(store):
    files = {("raw", "bookkeeper/bk/a.pb"): b"\x08\x01", ("findings", "violations/part-0"): b"v" * 1000,
             ("reports", "report.html"): b"<html/>"}
    writer = _write_attempt(store, "r1", "a1", files)
    # An object this writer did not write itself (Spark output, another process) is still listed.
    store.put(writer.key("metrics", "bk_ledger_replicas/part-0"), b"m")
    manifest = writer.publish({"violations": 2, "clusters": ["bk"]})

    assert manifest == read_manifest(store, "lab", "r1")
    assert manifest["attempt_id"] == "a1" and manifest["summary"] == {"violations": 2, "clusters": ["bk"]}
    listed = {o["key"]: o for o in manifest["objects"]}
    assert sorted(listed) == sorted(store.list("lab/runs/r1/attempts/a1/"))
    assert len(listed) == 4
    for key, entry in listed.items():
        data = store.get(key)
        assert entry["size"] == len(data) and entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert datetime.fromisoformat(manifest["created"]).tzinfo is not None


def test_rerun_replaces_the_previous_attempt_completely(store):
    _write_attempt(store, "r1", "a1", {("raw", "old-only.bin"): b"1", ("tables", "t/p0"): b"old"}).publish({"n": 1})
    second = _write_attempt(store, "r1", "a2", {("tables", "t/p0"): b"new"})
    manifest = second.publish({"n": 2})

    assert list(store.list("lab/runs/r1/")) == ["lab/runs/r1/attempts/a2/tables/t/p0", "lab/runs/r1/manifest.json"]
    assert read_manifest(store, "lab", "r1")["attempt_id"] == "a2"
    assert [o["key"] for o in manifest["objects"]] == ["lab/runs/r1/attempts/a2/tables/t/p0"]
    assert len(list_runs(store, "lab")) == 1


def test_crash_before_publish_keeps_the_previous_run_valid(store):
    first = _write_attempt(store, "r1", "a1", {("raw", "x"): b"one", ("findings", "f"): b"f1"})
    published = first.publish({"n": 1})
    # A rerun writes part of its output and dies before publishing.
    _write_attempt(store, "r1", "a2", {("raw", "x"): b"two-partial"})

    assert read_manifest(store, "lab", "r1") == published
    for entry in published["objects"]:
        assert hashlib.sha256(store.get(entry["key"])).hexdigest() == entry["sha256"]

    # The next successful attempt collects both the old run and the crashed leftovers.
    _write_attempt(store, "r1", "a3", {("raw", "x"): b"three"}).publish({"n": 3})
    assert list(store.list("lab/runs/r1/attempts/")) == ["lab/runs/r1/attempts/a3/raw/x"]


def test_publishing_twice_is_idempotent(store):
    writer = _write_attempt(store, "r1", "a1", {("raw", "x"): b"1"})
    first = writer.publish({"n": 1})
    second = writer.publish({"n": 1})
    assert first["objects"] == second["objects"]
    assert list(store.list("lab/runs/r1/")) == ["lab/runs/r1/attempts/a1/raw/x", "lab/runs/r1/manifest.json"]


def test_unserializable_summary_publishes_nothing(store):
    writer = _write_attempt(store, "r1", "a1", {("raw", "x"): b"1"})
    with pytest.raises(TypeError, match="summary"):
        writer.publish({"when": datetime.now()})
    assert read_manifest(store, "lab", "r1") is None


def test_runs_are_listed_oldest_first_and_latest_run_looks_back(store):
    for run_id in ["scheduled__b", "manual__a", "scheduled__c"]:
        _write_attempt(store, run_id, "a1", {("raw", "x"): run_id.encode()}).publish({"run": run_id})
    _write_attempt(store, "unpublished", "a1", {("raw", "x"): b"x"})
    _write_attempt(store, "r1", "a1", {("raw", "x"): b"x"}).publish({})
    RunWriter(store, "other", "scheduled__z", "a1").publish({})  # another estate is not listed

    runs = list_runs(store, "lab")
    assert [r.run_id for r in runs] == ["scheduled__b", "manual__a", "scheduled__c", "r1"]
    assert runs == sorted(runs, key=lambda r: r.created)
    assert latest_run(store, "lab").run_id == "r1"
    assert latest_run(store, "lab", before="scheduled__c").run_id == "manual__a"
    assert latest_run(store, "lab", before="not-yet-published").run_id == "r1"
    assert latest_run(store, "lab", before=runs[1].created).run_id == "scheduled__b"
    assert latest_run(store, "lab", before=datetime(2000, 1, 1, tzinfo=timezone.utc)) is None
    assert [o["key"] for o in runs[0].objects("raw")] == ["lab/runs/scheduled__b/attempts/a1/raw/x"]
    assert runs[0].objects("tables") == []


def test_corrupt_manifest_is_an_error_naming_the_key(store):
    store.put(manifest_key("lab", "r1"), b"{not json")
    with pytest.raises(ManifestError) as info:
        read_manifest(store, "lab", "r1")
    assert info.value.key == "lab/runs/r1/manifest.json"
    store.put(manifest_key("lab", "r1"), json.dumps({"format": "something-else"}).encode())
    with pytest.raises(ManifestError, match="something-else"):
        list_runs(store, "lab")


def test_staging_writes_local_files_that_end_up_in_the_run(store, store_kind, tmp_path):
    writer = RunWriter(store, "lab", "r1", "a1")
    writer.put("raw", "bookkeeper/bk/L1", b"raw-bytes")
    staging_root = tmp_path / "staging"
    with LocalStaging(writer, staging_root=staging_root) as staging:
        assert staging.direct == (store_kind == "local")
        raw_dir = staging.fetch("raw", "bookkeeper")
        assert (raw_dir / "bk" / "L1").read_bytes() == b"raw-bytes"
        out = staging.dir("tables", "bk_ledgers")
        (out / "part-00000.parquet").write_bytes(b"PAR1....")  # what Spark would write
        (out / "_SUCCESS").write_bytes(b"")
        if store_kind == "local":
            assert out == store.local_path(writer.key("tables", "bk_ledgers"))
        else:
            assert staging_root in out.parents
    assert not staging_root.exists() or not any(staging_root.iterdir())
    manifest = writer.publish({})
    assert [o["key"][len(writer.prefix):] for o in manifest["objects"]] == \
        ["raw/bookkeeper/bk/L1", "tables/bk_ledgers/_SUCCESS", "tables/bk_ledgers/part-00000.parquet"]
    assert store.get(writer.key("tables", "bk_ledgers", "part-00000.parquet")) == b"PAR1...."


def test_staging_uploads_only_new_or_changed_files(s3_endpoint, s3_bucket, tmp_path):
    store = open_s3_store(s3_endpoint, f"s3://{s3_bucket}")
    writer = RunWriter(store, "lab", "r1", "a1")
    writer.put("raw", "a", b"a")
    writer.put("raw", "b", b"b")
    staging = LocalStaging(writer, staging_root=tmp_path)
    raw = staging.fetch("raw")
    (raw / "b").write_bytes(b"b-changed!")
    (staging.dir("metrics") / "m").write_bytes(b"m")
    assert staging.commit() == ["lab/runs/r1/attempts/a1/metrics/m", "lab/runs/r1/attempts/a1/raw/b"]
    staging.cleanup()
    assert list(tmp_path.iterdir()) == []


def test_staging_uploads_nothing_when_the_job_fails(s3_endpoint, s3_bucket, tmp_path):
    store = open_s3_store(s3_endpoint, f"s3://{s3_bucket}")
    writer = RunWriter(store, "lab", "r1", "a1")
    with pytest.raises(RuntimeError):
        with LocalStaging(writer, staging_root=tmp_path) as staging:
            (staging.dir("tables") / "half-written").write_bytes(b"x")
            raise RuntimeError("spark job failed")
    assert list(store.list("")) == []
    assert list(tmp_path.iterdir()) == []



def test_a_rewritten_table_folder_replaces_the_stored_one_whole(s3_endpoint, s3_bucket, tmp_path):
    """A rerun of the same task writes part files under new names: the earlier ones must not stay beside them."""
    store = open_s3_store(s3_endpoint, f"s3://{s3_bucket}")
    writer = RunWriter(store, "lab", "r1", "a1")
    for name in ("_SUCCESS", "part-00000-first.parquet"):
        writer.put("findings", f"violations/system=a/{name}", b"1")
    writer.put("findings", "violations/system=b/part-00000-other.parquet", b"b")   # another system's folder
    writer.put("findings", "violations/system=b/_SUCCESS", b"")
    with LocalStaging(writer, staging_root=tmp_path) as staging:
        folder = staging.fetch("findings") / "violations" / "system=a"
        for old in folder.iterdir():
            old.unlink()
        (folder / "part-00000-second.parquet").write_bytes(b"2")
        (folder / "_SUCCESS").write_bytes(b"")
    assert sorted(k[len(writer.prefix):] for k in store.list(writer.prefix)) == [
        "findings/violations/system=a/_SUCCESS", "findings/violations/system=a/part-00000-second.parquet",
        "findings/violations/system=b/_SUCCESS", "findings/violations/system=b/part-00000-other.parquet"]
