"""The broker version a cluster's admin API reported (raw `broker-version.txt`) reaches the audit job of a pipeline
run: spark_jobs/run.py normalizes it into pulsar_brokers and the audit stage picks the source cluster's PIP-33
snapshot cache rule from it, with the brokers' default cache size (10)."""
from __future__ import annotations

import json
import os

import pytest

from audit.transforms.common import read, write
from audit.systems.pulsar.transforms.audit import INPUTS
from spark_jobs.run import main
from tests.pulsar.transforms.test_audit import SUB, cursor, entry, scenario

TOPIC = "persistent://t/ns/versions"
# east's subscription read twelve snapshots (locals 5:2, 5:3, then 5:12..5:21) and its MDP is 5:5, no UPDATE yet.
# Ten are cached. TreeMap (before apache/pulsar#25044): the newest ten, 5:12..5:21, none at or below the MDP.
# Distance-spread (since): head 5:2 always stays and 5:3, far from the dense run after it, survives the evictions.
LOCALS = [2, 3, *range(12, 22)]


def _tables(spark) -> dict:
    east = [entry("east", TOPIC, f"5:{i}", seq=i) for i in range(30)]
    east += [entry("east", TOPIC, f"5:{30 + n}", marker=12, snapshot_id=f"s{n}", local=f"5:{loc}",
                   clusters={"west": f"9:{loc}"}) for n, loc in enumerate(LOCALS)]
    west = [entry("west", TOPIC, f"9:{i}", seq=i, origin="east", src=f"5:{i}") for i in range(30)]
    t = scenario(TOPIC, east, west, [cursor("east", TOPIC, SUB, "5:5", read="5:42")],
                 [cursor("west", TOPIC, SUB, "9:1")])
    return {name: spark.createDataFrame(rows, INPUTS[name]) for name, rows in t.items() if name != "pulsar_brokers"}


@pytest.mark.parametrize("version, expected", [("3.0.12", None), ("4.2.0", "9:3")])
def test_reported_version_reaches_the_audit_job(spark, tmp_path, version, expected):
    raw, tables, attempt = tmp_path / "raw", tmp_path / "tables", tmp_path / "attempt"
    (raw / "pulsar" / "east").mkdir(parents=True)
    (raw / "pulsar" / "east" / "broker-version.txt").write_bytes(version.encode())   # as the broker answers
    counts = main(["--system", "pulsar", "--stage", "normalize", "--input", str(raw), "--output", str(tables)])
    assert counts["pulsar_brokers"] == 1
    for name, df in _tables(spark).items():   # the dumped topic itself, as normalize would have written it
        write(df, os.path.join(tables, name))
    main(["--system", "pulsar", "--stage", "audit", "--input", str(tables), "--output", str(attempt),
          "--run-id", "r1", "--as-of-ms", "1795440000000"])
    failover = {r["source_cluster"]: r for r in read(spark, str(attempt / "metrics" / "pulsar_failover")).collect()}
    assert failover["east"]["expected_target_mdp"] == expected
    coverage = [r["detail"] or "" for r in read(spark, str(attempt / "metrics" / "pulsar_coverage")).collect()]
    assert not any("broker version unknown" in d for d in coverage)


def test_without_a_version_the_current_cache_is_assumed_and_said(spark, tmp_path):
    tables, attempt = tmp_path / "tables", tmp_path / "attempt"
    for name, df in _tables(spark).items():
        write(df, os.path.join(tables, name))
    main(["--system", "pulsar", "--stage", "audit", "--input", str(tables), "--output", str(attempt),
          "--run-id", "r1", "--as-of-ms", "1795440000000"])
    failover = {r["source_cluster"]: r for r in read(spark, str(attempt / "metrics" / "pulsar_failover")).collect()}
    assert failover["east"]["expected_target_mdp"] == "9:3"
    evidence = [json.loads(r["evidence"]) for r in read(spark, str(attempt / "findings")).collect()
                if r["evidence"]]
    notes = [e.get("snapshot_cache_note") or "" for e in evidence if "snapshot_cache" in e]
    assert all(n.startswith("broker version unknown") for n in notes)


def test_the_version_the_estate_declares_wins_over_the_reported_one(spark, tmp_path):
    raw, tables, attempt = tmp_path / "raw", tmp_path / "tables", tmp_path / "attempt"
    (raw / "pulsar" / "east").mkdir(parents=True)
    (raw / "pulsar" / "east" / "broker-version.txt").write_bytes(b"3.0.12")   # reported: the TreeMap cache
    main(["--system", "pulsar", "--stage", "normalize", "--input", str(raw), "--output", str(tables)])
    for name, df in _tables(spark).items():
        write(df, os.path.join(tables, name))
    estate = tmp_path / "estate.yaml"
    estate.write_text(f"""
estate: versions
store: {{uri: "file://{tmp_path / 'store'}"}}
systems:
  pulsar:
    - {{name: east, source: admin, admin_url: "http://east:8080", namespaces: [t/ns], broker_version: "4.2.0"}}
""")
    main(["--system", "pulsar", "--stage", "audit", "--input", str(tables), "--output", str(attempt),
          "--run-id", "r1", "--as-of-ms", "1795440000000", "--estate", str(estate)])
    failover = {r["source_cluster"]: r for r in read(spark, str(attempt / "metrics" / "pulsar_failover")).collect()}
    assert failover["east"]["expected_target_mdp"] == "9:3"   # the declared 4.2.0: the distance-spread cache
