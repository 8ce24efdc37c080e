"""`replaudit estate schema` and `replaudit estate check FILE`."""
import json
from pathlib import Path

import pytest
import yaml

from audit.cli.main import main
from audit.config import EstateError, load_estate

REPO = Path(__file__).resolve().parents[2]
LAB_ESTATE = REPO / "lab" / "estate.yaml"


def _schema(capsys) -> dict:
    assert main(["estate", "schema"]) == 0
    return json.loads(capsys.readouterr().out)


def test_schema_has_every_system_section_and_the_flat_thresholds(capsys):
    schema = _schema(capsys)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(schema["required"]) == {"estate", "systems"}
    defs = schema["$defs"]
    assert set(defs["Systems"]["properties"]) >= {"bookkeeper", "pulsar"}
    assert defs["Systems"]["additionalProperties"] is False
    # YAML key names (aliases), not the Python attribute names
    assert set(defs["Thresholds"]["properties"]) >= {"open_ledger_max_age", "min_racks_per_write_quorum",
                                                     "pulsar_replicator_backlog_max", "pulsar_snapshot_max_age"}
    assert set(defs["PulsarDump"]["properties"]) == {"concurrency", "chunk_entries", "max_entries_per_topic", "mode"}
    assert defs["PulsarDump"]["properties"]["mode"]["enum"] == ["admin", "reader"]
    assert "service_url" in defs["PulsarCluster"]["properties"]
    assert "bookie_window" in defs["BookKeeperCluster"]["properties"]


def test_schema_validates_the_lab_estate_and_refuses_typos(capsys):
    jsonschema = pytest.importorskip("jsonschema")
    schema = _schema(capsys)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert list(validator.iter_errors(yaml.safe_load(LAB_ESTATE.read_text()))) == []
    for bad in ("estate: e\nsystems: {pulsar: [{name: e, source: lab, dump: {concurency: 2}}]}\n",
                "estate: e\nthresholds: {open_ledger_max_age: 6 hours}\nsystems: {}\n",
                "estate: e\nstore: {uri: s3://b, credentials: {access_key: AKIA, secret_key: {env: S}}}\nsystems: {}\n",
                "estate: e\nsystems: {bookeeper: []}\n"):
        assert list(validator.iter_errors(yaml.safe_load(bad))), bad


def test_check_a_good_file(capsys):
    assert main(["estate", "check", str(LAB_ESTATE)]) == 0
    out = capsys.readouterr().out
    assert out == ("ok: lab: 14 clusters (bookkeeper: bk-lab; pulsar: east, west, south; kafka: legacy-s1, legacy-s2, "
                   "epoch-s1, epoch-s2, unclean, power, rolling, primary, dr, dr-legacy)\n")


def test_check_a_file_without_clusters(tmp_path, capsys):
    path = tmp_path / "empty.yaml"
    path.write_text("estate: empty\nsystems: {}\n")
    assert main(["estate", "check", str(path)]) == 0
    assert capsys.readouterr().out == "ok: empty: 0 clusters\n"


def test_check_a_bad_file_prints_the_estate_error_and_exits_2(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("estate: e\nsystems:\n  pulsar:\n    - {name: e, source: lab, dump: {concurrency: 0}}\n")
    assert main(["estate", "check", str(path)]) == 2
    captured = capsys.readouterr()
    with pytest.raises(EstateError) as info:
        load_estate(path)
    assert captured.err == f"{info.value}\n"
    assert captured.err == f"{path}: systems.pulsar[0].dump.concurrency: an integer >= 1, got int 0\n"
    assert captured.out == ""


def test_check_a_missing_file(tmp_path, capsys):
    assert main(["estate", "check", str(tmp_path / "absent.yaml")]) == 2
    assert "readable estate file" in capsys.readouterr().err
