"""Regression, through the CLI on imported payloads: two clusters collected a minute apart while traffic flowed
(docs/pulsar/audit.md "Snapshots minutes apart").

east publishes e0..e5; its collection read the topic after e3 (e4, e5 came later). west was collected a minute
after east: it holds the copies of e0..e5 and PIP-33 had moved its cursor to e3's copy. Judged as one instant
(what replaudit did before), e4 and e5 count as acked on east (false redelivery, and a repair acking them on west
that no consumer received), and west's acks beyond east's first read count as skips. With the reads' instants
and the rereads around west's read: no finding, the copies after east's window not compared, east's progress
between its reads unsettled, no repair."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit.cli.main import EXIT_CLEAN, EXIT_VIOLATIONS, main
from audit.systems.pulsar.formats.entry import encode_entry_line
from audit.systems.pulsar.formats.read_instant import encode_read_instant

TOPIC = "persistent://acme/geo/orders"
T0 = 1_795_440_000_000
REPLICATED = {"pulsar.replicated.subscription": 1}


def _cursor(mdp: str, read: str, **props) -> dict:
    return {"markDeletePosition": mdp, "readPosition": read, "individuallyDeletedMessages": "[]",
            "state": "Open", "properties": props}


def _stats_internal(ledger: int, entries: int, cursors: dict) -> bytes:
    return json.dumps({"entriesAddedCounter": entries, "numberOfEntries": entries, "totalSize": 100 * entries,
                       "currentLedgerEntries": entries, "currentLedgerSize": 100 * entries,
                       "lastConfirmedEntry": f"{ledger}:{entries - 1}", "state": "LedgerOpened",
                       "ledgers": [{"ledgerId": ledger, "entries": 0, "size": 0}], "cursors": cursors}).encode()


def _stats(remote: str, consumed: bool) -> bytes:
    sub = {"isReplicated": True, "isDurable": True, "msgOutCounter": 6 if consumed else 0,
           "lastConsumedTimestamp": T0 if consumed else 0, "consumers": []}
    return json.dumps({"subscriptions": {"orders": sub},
                       "replication": {remote: {"connected": True, "replicationBacklog": 0}}}).encode()


@pytest.fixture(autouse=True)
def clock(monkeypatch):
    """The run's "now": shortly after the rereads (no snapshot was taken: data younger than snapshot_max_age)."""
    from audit import pipeline

    monkeypatch.setattr(pipeline, "now_ms", lambda: T0 + 130_000)


def _put(folder: Path, rel: str, data: bytes) -> None:
    (folder / rel).parent.mkdir(parents=True, exist_ok=True)
    (folder / rel).write_bytes(data)


def _cluster(root: Path, name: str, remote: str, ledger: int, lines: list[bytes], cursors: list[dict],
             reads: list[int], consumed: bool) -> Path:
    """A cluster folder as replaudit's collector and reread store it: cursors[0] / reads[0] the collection's
    read, the others the rereads (no read instants when `reads` is empty)."""
    folder = root / name
    t = "topics/acme/geo/orders/"
    _put(folder, t + "stats-internal.json", _stats_internal(ledger, len(lines), cursors[0]))
    _put(folder, t + "stats.json", _stats(remote, consumed))
    _put(folder, t + f"dump/{ledger}/0-{len(lines) - 1}.jsonl", b"".join(lines))
    _put(folder, t + "dump.json", json.dumps({
        "topic": TOPIC, "from": f"{ledger}:-1", "to": f"{ledger}:{len(lines) - 1}", "entries_expected": len(lines),
        "entries_read": len(lines), "entries_failed": 0, "complete": True}).encode())
    _put(folder, "broker-version.txt", b"3.0.12")
    for n, at in enumerate(reads):
        body = t + ("stats-internal.json" if n == 0 else f"rereads/{n}/stats-internal.json")
        if n:
            _put(folder, body, _stats_internal(ledger, len(lines), cursors[n]))
        _put(folder, body + ".read.json", encode_read_instant(None, at, at + 20))
    return folder


def _run(tmp_path: Path, reads: bool) -> tuple[int, dict, list, list]:
    e = [encode_entry_line(5, i, b"x", producer_name="p-east", sequence_id=i, publish_time_ms=T0 + i * 1000)
         for i in range(4)]
    w = [encode_entry_line(9, i, b"x", producer_name="p-east", sequence_id=i, publish_time_ms=T0 + i * 1000,
                           replicated_from="east", properties={"__MSG_PROP_REPL_SOURCE_POSITION": f"5:{i}"})
         for i in range(6)]

    def east_at(mdp):
        return {"orders": _cursor(mdp, "5:4", **REPLICATED), "pulsar.repl.west": _cursor("5:3", "5:4")}

    def west_at(mdp):
        return {"orders": _cursor(mdp, "9:6", **REPLICATED), "pulsar.repl.east": _cursor("9:5", "9:6")}

    # east: collected at T0+10 s with its consumer at e1; acked e3 (and e5, beyond its window) by the rereads
    east = _cluster(tmp_path / "taken", "east", "west", 5, e,
                    [east_at("5:1"), east_at("5:5"), east_at("5:5")],
                    [T0 + 10_000, T0 + 120_000, T0 + 120_200] if reads else [], consumed=True)
    # west: collected a minute later; PIP-33 had moved its cursor to e3's copy
    west = _cluster(tmp_path / "taken", "west", "east", 9, w,
                    [west_at("9:3"), west_at("9:3"), west_at("9:3")],
                    [T0 + 70_000, T0 + 120_100, T0 + 120_300] if reads else [], consumed=False)
    estate = tmp_path / "estate.yaml"
    estate.write_text(f'estate: apart\nstore: {{uri: "file://{tmp_path / "store"}"}}\nspark: {{master: "local[2]"}}\n'
                      "systems:\n  pulsar:\n"
                      "    - {name: east, source: admin, admin_url: 'http://east:8080', namespaces: [acme/geo]}\n"
                      "    - {name: west, source: admin, admin_url: 'http://west:8080', namespaces: [acme/geo]}\n")
    for name, folder in (("east", east), ("west", west)):
        assert main(["import", "--estate", str(estate), "--run-id", "taken", "--system", "pulsar", "--cluster",
                     name, "--kind", "cluster-folder", str(folder)]) == EXIT_CLEAN
    code = main(["run", "--estate", str(estate), "--run-id", "audited", "--from-raw", "taken", "--json"])
    attempt = next((tmp_path / "store" / "apart" / "runs" / "audited" / "attempts").iterdir())
    import pyarrow.dataset as ds

    failover = ds.dataset(str(attempt / "metrics" / "pulsar_failover")).to_table().to_pylist()
    coverage = ds.dataset(str(attempt / "metrics" / "pulsar_coverage")).to_table().to_pylist()
    summary = json.loads((tmp_path / "store" / "apart" / "runs" / "audited" / "manifest.json").read_text())["summary"]
    return code, summary, failover, coverage


def _row(failover: list, source: str) -> dict:
    (row,) = [r for r in failover if r["source_cluster"] == source]
    return row


def test_reads_minutes_apart_with_rereads_raise_nothing_and_compare_only_what_both_speak_for(tmp_path, capsys):
    code, summary, failover, coverage = _run(tmp_path, reads=True)
    capsys.readouterr()
    ew = _row(failover, "east")
    assert (ew["redelivered"], ew["skipped"], ew["unsettled"], ew["after_source_window"]) == (0, 0, 0, 2)
    assert ew["to_acknowledge_count"] == 0 and ew["exact_target_mdp"] == "9:3"   # nothing to repair
    assert (ew["target_read_at_ms"], ew["source_read_before_ms"], ew["source_read_after_ms"]) == (
        T0 + 120_120, T0 + 120_020, T0 + 120_200)
    assert coverage == [] and summary["complete"] and code == EXIT_CLEAN


def test_the_same_dumps_without_instants_are_judged_as_one_instant_and_say_so(tmp_path, capsys):
    code, summary, failover, coverage = _run(tmp_path, reads=False)
    capsys.readouterr()
    ew = _row(failover, "east")
    # west acked e2, e3 which east's only read had not: skips, and the run says they rest on simultaneity
    assert (ew["skipped"], ew["after_source_window"]) == (2, 2)
    assert [(c["cluster"], c["target_cluster"], c["what"], c["entry_count"]) for c in coverage] == [
        ("east", "west", "read_instants_unknown", 2)]
    assert code == EXIT_VIOLATIONS and not summary["complete"]
