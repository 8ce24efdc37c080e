"""`replaudit import --system pulsar`: everything a hand-taken Pulsar collection consists of lands in the collector's
raw layout, validated, never replacing evidence; `replaudit run --from-raw` audits it as the collected run."""
from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest

from audit.cli.main import EXIT_CLEAN, EXIT_INCOMPLETE, EXIT_USAGE, EXIT_VIOLATIONS, main
from audit.systems.pulsar.formats.entry import METADATA_HEADERS

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
AS_OF_MS = 1_795_440_000_000   # every run's clock: snapshot ages are judged against it, so runs compare
TOPIC = "persistent://public/default/orders-partition-0"
# a few scenarios of the default world: every kind of file a collection holds, on all three clusters
LAB = "{seed: 7, scenarios: [healthy, delayed-message, ack-holes, three-clusters, producer-restart]}"


def _estate(tmp_path: Path, clusters=("east",)) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    p = tmp_path / "estate.yaml"
    lines = "".join(f"    - {{name: {c}, source: lab, lab: {LAB}}}\n" for c in clusters)
    p.write_text(f'estate: imp\nstore: {{uri: "file://{tmp_path / "store"}"}}\nspark: {{master: "local[2]"}}\n'
                 f"systems:\n  pulsar:\n{lines}")
    return p


def _attempt(tmp_path: Path, run_id: str) -> Path:
    return next((tmp_path / "store" / "imp" / "runs" / run_id / "attempts").iterdir())


def _import(estate: Path, run_id: str, cluster: str, kind: str, *args: str) -> int:
    return main(["import", "--estate", str(estate), "--run-id", run_id, "--system", "pulsar", "--cluster", cluster,
                 "--kind", kind, *map(str, args)])


def _topics(cluster_raw: Path) -> dict[str, Path]:
    return {"persistent://" + d.relative_to(cluster_raw / "topics").as_posix(): d
            for d in sorted(cluster_raw.glob("topics/*/*/*")) if d.is_dir()}


@pytest.fixture(scope="module")
def clock():
    from audit import pipeline

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pipeline, "now_ms", lambda: AS_OF_MS)
        yield


@pytest.fixture(scope="module")
def lab(tmp_path_factory, clock):
    """The lab estate collected and audited once: (tmp folder, estate, raw/pulsar folder)."""
    tmp = tmp_path_factory.mktemp("pulsar-import")
    estate = _estate(tmp, ("east", "west", "south"))
    assert main(["run", "--estate", str(estate), "--run-id", "lab", "--json"]) == EXIT_VIOLATIONS
    return tmp, estate, _attempt(tmp, "lab") / "raw" / "pulsar"


def _copy_only(src: Path, dest: Path, keep) -> Path | None:
    """`dest` holding the files of `src` whose relative path `keep` accepts; None when there is none."""
    chosen = [p for p in sorted(src.rglob("*")) if p.is_file() and keep(p.relative_to(src).as_posix())]
    for p in chosen:
        (dest / p.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(p, dest / p.relative_to(src))
    return dest if chosen else None


def _summary(tmp: Path, run_id: str) -> dict:
    return json.loads((tmp / "store" / "imp" / "runs" / run_id / "manifest.json").read_text())["summary"]


def test_lab_evidence_imported_kind_by_kind_and_as_folders_audits_the_same(lab, capsys):
    tmp, estate, raw = lab
    collected = _summary(tmp, "lab")
    # the lab's only blind spot is the one it injects (a restarted producer's repeated keys, not paired)
    assert {g["what"] for g in collected["coverage_gaps"]} <= {"pairing_ambiguous"}
    # east kind by kind, as pulsar-admin outputs and the collector's dump files
    for topic, folder in _topics(raw / "east").items():
        for kind, name in (("stats-internal", "stats-internal.json"), ("stats", "stats.json"),
                           ("dump-window", "dump.json"), ("message-ttl", "message-ttl.json")):
            assert _import(estate, "imp", "east", kind, "--topic", topic, folder / name) == EXIT_CLEAN
        for status in sorted(folder.glob("subscriptions/*/replicated-status.json")):
            assert _import(estate, "imp", "east", "replicated-status", "--topic", topic, "--subscription",
                           unquote(status.parent.name), status) == EXIT_CLEAN
        if (folder / "dump").is_dir():
            assert _import(estate, "imp", "east", "dump", "--topic", topic, folder / "dump") == EXIT_CLEAN
        # the read instants and rereads (no kind of their own): a topic folder holding only them, added
        extras = _copy_only(folder, tmp / "extras" / "east" / folder.name, lambda rel: rel.endswith(".read.json")
                            or rel.startswith("rereads/"))
        if extras is not None:
            assert _import(estate, "imp", "east", "topic-folder", "--topic", topic, extras) == EXIT_CLEAN
    assert _import(estate, "imp", "east", "collection-report", raw / "east" / "collection.json") == EXIT_CLEAN
    assert _import(estate, "imp", "east", "broker-version", raw / "east" / "broker-version.txt") == EXIT_CLEAN
    # west one topic folder at a time, south as the whole cluster folder
    for topic, folder in _topics(raw / "west").items():
        assert _import(estate, "imp", "west", "topic-folder", "--topic", topic, folder) == EXIT_CLEAN
    assert _import(estate, "imp", "west", "collection-report", raw / "west" / "collection.json") == EXIT_CLEAN
    assert _import(estate, "imp", "west", "broker-version", raw / "west" / "broker-version.txt") == EXIT_CLEAN
    for name in ("east", "west"):   # the reread stage's report: a cluster folder holding only it
        only = _copy_only(raw / name, tmp / "extras" / f"{name}-reread", lambda rel: rel == "reread.json")
        if only is not None:
            assert _import(estate, "imp", name, "cluster-folder", only) == EXIT_CLEAN
    assert _import(estate, "imp", "south", "cluster-folder", raw / "south") == EXIT_CLEAN
    capsys.readouterr()
    imported = _attempt(tmp, "imp") / "raw" / "pulsar"
    every = sorted(p.relative_to(raw).as_posix() for p in raw.rglob("*") if p.is_file())
    assert sorted(p.relative_to(imported).as_posix() for p in imported.rglob("*") if p.is_file()) == every
    for key in every:
        assert (imported / key).read_bytes() == (raw / key).read_bytes(), key

    # stored evidence is never replaced: the same file again is refused, and the bytes stay
    west_topic, west_folder = next(iter(_topics(raw / "west").items()))
    assert _import(estate, "imp", "west", "stats", "--topic", west_topic,
                   REAL / "pulsar-stats-replication-07.json") == EXIT_INCOMPLETE
    rejected = json.loads(capsys.readouterr().out)["rejected"]
    assert len(rejected) == 1 and "already stored" in rejected[0]["reason"]
    again = _attempt(tmp, "imp") / "raw" / "pulsar" / "west" / west_folder.relative_to(raw / "west") / "stats.json"
    assert again.read_bytes() == (west_folder / "stats.json").read_bytes()

    assert main(["run", "--estate", str(estate), "--run-id", "audit", "--from-raw", "imp"]) == EXIT_VIOLATIONS
    audited = _summary(tmp, "audit")
    assert audited["counts"] == collected["counts"] and audited["pulsar"] == collected["pulsar"]
    assert (audited["complete"], audited["coverage_gaps"]) == (collected["complete"], collected["coverage_gaps"])


def _old_broker(chunk: bytes) -> bytes:
    """The chunk as a broker before apache/pulsar#11443 answers: none of the metadata headers."""
    out = []
    for line in chunk.splitlines():
        doc = json.loads(line)
        drop = {h.lower() for h in METADATA_HEADERS}
        doc["headers"] = {k: v for k, v in doc.get("headers", {}).items() if k.lower() not in drop}
        out.append(json.dumps(doc).encode())
    return b"\n".join(out) + b"\n"


def test_a_dump_without_its_window_and_an_old_brokers_dump_are_not_covered_by_name(lab, capsys):
    tmp, _, raw = lab
    estate = _estate(tmp / "partial", ("east", "west"))
    delayed, healthy = "persistent://lab/geo/orders-delayed", "persistent://lab/geo/orders-healthy"
    east = raw / "east" / "topics" / "lab" / "geo" / "orders-delayed"
    west = raw / "west" / "topics" / "lab" / "geo" / "orders-healthy"
    # east: everything of orders-delayed but its dump.json
    for kind, name in (("stats-internal", "stats-internal.json"), ("stats", "stats.json"), ("dump", "dump")):
        assert _import(estate, "p", "east", kind, "--topic", delayed, east / name) == EXIT_CLEAN
    # west: the whole orders-healthy folder, its entries as an old broker served them
    old = tmp / "old-west" / "orders-healthy"
    shutil.copytree(west, old)
    for chunk in old.glob("dump/*/*.jsonl"):
        chunk.write_bytes(_old_broker(chunk.read_bytes()))
    assert _import(estate, "p", "west", "topic-folder", "--topic", healthy, old) == EXIT_CLEAN
    capsys.readouterr()
    assert main(["run", "--estate", str(estate), "--run-id", "pa", "--from-raw", "p", "--json"]) in (
        EXIT_INCOMPLETE, EXIT_VIOLATIONS)
    summary = json.loads(capsys.readouterr().out)
    assert not summary["complete"]
    assert not any(summary["counts"]["by_cluster"].get("pulsar/west", {}).values())   # nothing judged from west
    gaps = {(g["cluster"], g["what"]): g["error"] for g in summary["coverage_gaps"]}
    assert {("east", "dump-window"), ("west", "dump-chunk")} <= set(gaps), gaps
    assert gaps[("east", "dump-window")].startswith(f"{delayed} on cluster east: dump chunks without their window")
    assert gaps[("west", "dump-chunk")].startswith(f"{healthy} on cluster west: ")
    assert "apache/pulsar#11443" in gaps[("west", "dump-chunk")]


def test_bad_pulsar_import_is_a_usage_error(tmp_path, capsys):
    estate = _estate(tmp_path)
    fixture = str(REAL / "pulsar-stats-internal-01.json")
    base = ["import", "--estate", str(estate), "--system", "pulsar", "--cluster", "east"]
    assert main(base + ["--kind", "stats-internal", "--topic", "orders", fixture]) == EXIT_USAGE
    assert "persistent://tenant/namespace/topic" in capsys.readouterr().err
    assert main(base + ["--kind", "ledger-metadata", "--topic", "persistent://a/b/c", fixture]) == EXIT_USAGE
    assert "stats-internal" in capsys.readouterr().err
    assert main(base + ["--kind", "replicated-status", "--topic", "persistent://a/b/c", fixture]) == EXIT_USAGE
    assert "--subscription" in capsys.readouterr().err
    assert main(base + ["--kind", "collection-report", "--topic", "persistent://a/b/c", fixture]) == EXIT_USAGE
    assert "--topic" in capsys.readouterr().err


def _line(ledger: int, entry: int, **headers) -> bytes:
    doc = {"ledger_id": ledger, "entry_id": entry, "status": 200, "content_type": "application/octet-stream",
           "headers": {"X-Pulsar-Message-ID": f"{ledger}:{entry}", "X-Pulsar-producer-name": "p",
                       "X-Pulsar-sequence-id": str(entry), **headers},
           "body_b64": base64.b64encode(b"m").decode()}
    return json.dumps(doc).encode() + b"\n"


def test_invalid_files_are_refused_naming_file_field_and_expectation_and_nothing_is_stored(tmp_path, capsys):
    estate = _estate(tmp_path, ("east",))
    bad = tmp_path / "bad"
    bad.mkdir()
    cases = {  # kind, extra flags, file name, bytes, what the reason must say
        "stats-internal": ([], "si.json", b'{"lastConfirmedEntry": "1:2", "ledgers": []}', "field cursors"),
        "stats": ([], "stats.json", b"<html><title>502 Bad Gateway</title></html>", "502 Bad Gateway"),
        "replicated-status": (["--subscription", "s"], "st.json", b'{"persistent://public/default/other": true}',
                              "field persistent://public/default/other: expected 'persistent://public/default/"
                              "orders-partition-0' or one of its partitions"),
        "dump-window": ([], "dump.json", json.dumps({"topic": TOPIC, "from": "5:1", "to": "8:2"}).encode(),
                        "field complete: expected true or false"),
        "collection-report": ([], "collection.json", json.dumps({"system": "pulsar", "cluster": "west"}).encode(),
                              "field cluster: expected 'east'"),
        "broker-version": ([], "version.txt", b"<html><title>404 Not Found</title></html>",
                           "field body: expected a broker version such as 3.0.12"),
        "message-ttl": ([], "ttl.json", b'{"reason": "Topic not found"}', "field body: expected messageTTLInSeconds"),
        "namespace-message-ttl": ([], "ns-ttl.json", b"-1", "field body: expected messageTTLInSeconds"),
    }
    for kind, (flags, name, data, why) in cases.items():
        (bad / name).write_bytes(data)
        topic = [] if kind in ("collection-report", "broker-version") else ["--topic", TOPIC]
        assert _import(estate, "x", "east", kind, *topic, *flags, bad / name) == EXIT_INCOMPLETE, kind
        out = json.loads(capsys.readouterr().out)
        assert out["stored"] == 0 and len(out["rejected"]) == 1, kind
        assert out["rejected"][0]["reason"].startswith(str(bad / name)) and why in out["rejected"][0]["reason"], \
            out["rejected"]
    # a dump folder: a chunk missing a line and a line of another position are refused; the good chunk is stored
    dump = tmp_path / "dump"
    (dump / "12").mkdir(parents=True)
    (dump / "12" / "0-1.jsonl").write_bytes(_line(12, 0) + _line(12, 1))
    (dump / "12" / "2-3.jsonl").write_bytes(_line(12, 2))
    (dump / "12" / "4-4.jsonl").write_bytes(_line(12, 9))
    assert _import(estate, "x", "east", "dump", "--topic", TOPIC, dump) == EXIT_INCOMPLETE
    out = json.loads(capsys.readouterr().out)
    assert out["stored"] == 1 and out["keys"] == ["pulsar/east/topics/public/default/orders-partition-0/dump/12/"
                                                  "0-1.jsonl"]
    reasons = {Path(r["file"]).name: r["reason"] for r in out["rejected"]}
    assert "field <lines>: expected one line per position 12:2..12:3 (1 missing, first 12:3)" in reasons["2-3.jsonl"]
    assert "4-4.jsonl:line 1: field ledger_id/entry_id: expected a position in 12:4..12:4" in reasons["4-4.jsonl"]
    # a topic folder with a file the collector never writes
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "notes.txt").write_text("?")
    shutil.copy(REAL / "pulsar-stats-internal-01.json", folder / "stats-internal.json")
    assert _import(estate, "x", "east", "topic-folder", "--topic", TOPIC, folder) == EXIT_INCOMPLETE
    out = json.loads(capsys.readouterr().out)
    assert out["stored"] == 1 and "'notes.txt' is not a file the collector writes" in out["rejected"][0]["reason"]
    stored = _attempt(tmp_path, "x") / "raw" / "pulsar" / "east"
    assert sorted(p.relative_to(stored).as_posix() for p in stored.rglob("*") if p.is_file()) == [
        "topics/public/default/orders-partition-0/dump/12/0-1.jsonl",
        "topics/public/default/orders-partition-0/stats-internal.json"]


def test_a_collected_and_reread_cluster_folder_is_imported_and_bad_instants_are_refused(tmp_path, capsys):
    """What the admin collector and the reread store for a cluster (read instants, rereads, reread.json) imports as
    one cluster folder; a read instant that does not decode is refused naming the file and the field."""
    from audit.collectors.base import DirSink
    from audit.systems.pulsar.collect.collector import PulsarCollector
    from audit.systems.pulsar.collect.reread import reread
    from audit.systems.pulsar.config import PulsarCluster, PulsarDump
    from audit.config.secrets import SecretResolver
    from audit.contracts import RereadRequest
    from lab.pulsar.admin_server import serve_pulsar_admin
    from lab.pulsar.runner import lab_world

    world, _ = lab_world({"seed": 7}, AS_OF_MS)
    raw = tmp_path / "taken" / "east"
    with serve_pulsar_admin(world, "east") as url:
        namespaces = tuple(sorted({t.name.split("//")[1].rsplit("/", 1)[0] for t in world.topics_of("east")}))
        cluster = PulsarCluster(name="east", source="admin", admin_url=url, namespaces=namespaces,
                                dump=PulsarDump(max_entries_per_topic=3))   # a few entries are enough here
        assert PulsarCollector().collect(cluster, DirSink(raw), SecretResolver(environ={})).counts["topics_dumped"]
        collected = sorted(p.relative_to(raw).as_posix() for p in raw.rglob("*") if p.is_file())
        reports = reread(RereadRequest((cluster,), lambda name: DirSink(raw), lambda name: collected,
                                       SecretResolver(environ={}), AS_OF_MS, None))
    (raw / "reread.json").write_text(reports["east"].to_json())
    every = sorted(p.relative_to(raw).as_posix() for p in raw.rglob("*") if p.is_file())
    assert "reread.json" in every and any("/rereads/2/stats-internal.json.read.json" in k for k in every)
    estate = _estate(tmp_path / "run", ("east",))
    assert _import(estate, "c", "east", "cluster-folder", raw) == EXIT_CLEAN
    capsys.readouterr()
    imported = _attempt(tmp_path / "run", "c") / "raw" / "pulsar" / "east"
    assert sorted(p.relative_to(imported).as_posix() for p in imported.rglob("*") if p.is_file()) == every
    assert all((imported / k).read_bytes() == (raw / k).read_bytes() for k in every)

    folder = tmp_path / "bad-topic"
    (folder / "rereads" / "1").mkdir(parents=True)
    (folder / "rereads" / "0").mkdir(parents=True)
    shutil.copy(REAL / "pulsar-stats-internal-01.json", folder / "stats-internal.json")
    shutil.copy(REAL / "pulsar-stats-internal-01.json", folder / "rereads" / "0" / "stats-internal.json")
    (folder / "stats-internal.json.read.json").write_text(
        '{"url": null, "requested_at_ms": 1795440000100, "answered_at_ms": 1795440000000}')
    (folder / "rereads" / "1" / "stats-internal.json").write_text('{"lastConfirmedEntry": "1:2", "ledgers": []}')
    (folder / "rereads" / "1" / "stats-internal.json.read.json").write_text('{"requested_at_ms": "soon"}')
    (folder / "dump.json.read.json").write_text('{"requested_at_ms": 1, "answered_at_ms": 2}')
    (folder / "namespace-message-ttl.json").write_bytes(b"")   # 204 No Content: the namespace sets none
    (folder / "namespace-message-ttl.json.read.json").write_text('{"requested_at_ms": 1, "answered_at_ms": 2}')
    assert _import(estate, "bad", "east", "topic-folder", "--topic", TOPIC, folder) == EXIT_INCOMPLETE
    out = json.loads(capsys.readouterr().out)
    assert out["stored"] == 3   # stats-internal.json and the namespace TTL with its instant
    reasons = {Path(r["file"]).relative_to(folder).as_posix(): r["reason"] for r in out["rejected"]}
    assert sorted(reasons) == ["dump.json.read.json", "rereads/0/stats-internal.json", "rereads/1/stats-internal.json",
                               "rereads/1/stats-internal.json.read.json", "stats-internal.json.read.json"]
    for rel, why in (("stats-internal.json.read.json", "field answered_at_ms: expected at or after requested_at_ms"),
                     ("rereads/1/stats-internal.json.read.json", "field requested_at_ms: expected milliseconds"),
                     ("rereads/1/stats-internal.json", "field cursors"),
                     ("rereads/0/stats-internal.json", "is not a file the collector writes"),
                     ("dump.json.read.json", "is not a file the collector writes")):
        assert reasons[rel].startswith(str(folder / rel)) and why in reasons[rel], reasons[rel]
