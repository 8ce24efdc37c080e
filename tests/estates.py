"""Estate files for end-to-end tests: one simulated BookKeeper cluster (optionally the Pulsar lab clusters too),
a store, optional extra top-level YAML."""
from __future__ import annotations

from pathlib import Path


PULSAR_LAB = """
  pulsar:
    - {name: east, source: lab, lab: {seed: 7}}
    - {name: west, source: lab, lab: {seed: 7}}
    - {name: south, source: lab, lab: {seed: 7}}
"""


def write_lab_estate(path: Path, *, estate: str, store: str, cluster: str, lab: str, extra: str = "",
                     pulsar: bool = False) -> Path:
    """`store` is the YAML mapping of the store block, e.g. '{uri: "file:///tmp/x"}'. `pulsar` adds the
    simulated Pulsar geo-replication clusters east, west and south."""
    path.write_text(f"""
estate: {estate}
store: {store}
spark: {{master: "local[2]"}}
{extra}
systems:
  bookkeeper:
    - name: {cluster}
      source: lab
      lab: {lab}
""" + (PULSAR_LAB if pulsar else ""))
    return path


def demo_seeds(seeds_estate: Path, tmp_path: Path, capsys) -> tuple[int, dict]:
    """`replaudit demo --json` on a committed seeds estate, its store and Spark moved under `tmp_path`:
    (exit code, the summary's `lab` scorecard)."""
    import json

    import yaml

    from audit.cli.main import main

    estate = yaml.safe_load(seeds_estate.read_text())
    estate["store"] = {"uri": f"file://{tmp_path / 'store'}"}
    estate["spark"] = {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "4"}}
    path = tmp_path / "estate.yaml"
    path.write_text(yaml.safe_dump(estate))
    code = main(["demo", "--estate", str(path), "--json"])
    return code, json.loads(capsys.readouterr().out)["lab"]


def exact_seed_by_seed(lab: dict, clusters: int, seeds=range(1, 21)) -> dict:
    """The lab scorecard's clusters, once every seed is asserted exact: no miss, no wrong count, no false alarm."""
    by_cluster = lab["by_cluster"]
    assert len(by_cluster) == clusters and {c["seed"] for c in by_cluster.values()} == set(seeds)
    bad = {name: c for name, c in by_cluster.items() if c["missed"] or c["wrong_count"] or c["false_alarms"]}
    assert bad == {}, (bad, lab["missed_items"], lab["wrong_count_items"], lab["false_alarm_items"])
    return by_cluster
