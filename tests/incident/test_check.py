"""`replaudit check`: an incident check scoped to one system and one topic, through the whole pipeline."""
from __future__ import annotations

import json


from audit.cli.main import main
from audit.config.estate import load_estate
from audit.store import open_store
from audit.store.run import list_runs
from tests.estates import write_lab_estate

TOPIC = "persistent://lab/geo/orders-one-way"


def _estate(tmp_path):
    return write_lab_estate(tmp_path / "estate.yaml", estate="incident",
                            store=f'{{uri: "file://{tmp_path / "store"}"}}',
                            cluster="bk-i", lab="{seed: 5, ledgers: 24}", pulsar=True)


def test_one_topic_of_one_system(tmp_path, capsys):
    estate = _estate(tmp_path)
    code = main(["check", "--estate", str(estate), "--system", "pulsar", "--subject", TOPIC + "*", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert summary["run_id"].startswith("incident__") and summary["run"]["kind"] == "incident"
    scope = summary["run"]["scope"]
    assert (scope["systems"], scope["subjects"], scope["not_asked"]) == (["pulsar"], [TOPIC + "*"],
                                                                         ["bookkeeper/bk-i"])
    # only that topic was collected, on every Pulsar cluster; nothing of BookKeeper
    (run,) = list_runs(open_store(load_estate(str(estate)).store.uri), "incident")
    raw = [o["key"].split("/raw/", 1)[1] for o in run.manifest["objects"] if "/raw/" in o["key"]]
    topics = {k.split("/")[2:6] and "/".join(k.split("/")[3:6]) for k in raw if k.split("/")[2] == "topics"}
    assert topics == {"lab/geo/orders-one-way"}
    assert not any(k.startswith("bookkeeper/") for k in raw)
    assert {k.split("/")[1] for k in raw if k.startswith("pulsar/")} == {"east", "west", "south"}
    # the findings and the lab's ground truth speak of that topic only, and agree
    assert set(summary["counts"]["by_system"]) <= {"pulsar"}
    lab = summary["lab"]
    assert (lab["missed"], lab["false_alarms"], lab["wrong_count"]) == (0, 0, 0), lab
    assert lab["injected"] == lab["detected"] == 1          # the one-way subscription of that topic
    assert summary["counts"]["by_check"] == {"pulsar.replicated_subscription_one_way": 1}
    assert lab["failover"]["expected"] == lab["failover"]["matched"] == 1
    assert code in (0, 1, 3)


def test_a_scope_the_estate_does_not_have_is_refused_by_name(tmp_path, capsys):
    estate = _estate(tmp_path)
    assert main(["check", "--estate", str(estate), "--system", "kafka"]) == 2
    assert "scope: systems: 'kafka' is not in the estate; expected one of bookkeeper, pulsar" in capsys.readouterr().err
    assert main(["check", "--estate", str(estate), "--cluster", "nope"]) == 2
    assert "scope: clusters: 'nope'" in capsys.readouterr().err
    assert main(["check", "--estate", str(estate), "--window", "soon"]) == 2
    assert "--window 'soon'" in capsys.readouterr().err


def test_a_system_that_cannot_narrow_to_subjects_is_refused_by_name(tmp_path, capsys):
    from tests.demo_system import registered

    path = tmp_path / "estate.yaml"
    path.write_text(f"""
estate: incident
store: {{uri: "file://{tmp_path / 'store'}"}}
systems:
  demo:
    - {{name: demo-1, source: lab}}
""")
    with registered():
        assert main(["check", "--estate", str(path), "--subject", "12*"]) == 2
    assert "scope: subjects: '12*': expected a scope whose systems narrow to subjects: demo cannot yet" in \
        capsys.readouterr().err
    assert not (tmp_path / "store").exists()


def test_one_ledger_of_one_system(tmp_path, capsys):
    import time

    from lab.bookkeeper import build_lab, emit

    estate = _estate(tmp_path)
    # the same simulated cluster, outside the pipeline: which ledgers have findings
    truth = emit(build_lab({"seed": 5, "ledgers": 24}, int(time.time() * 1000), cluster="bk-i"), _Discard())
    with_findings = sorted({f["ledger_id"] for f in truth["findings"] if f.get("ledger_id") is not None})
    assert len(with_findings) >= 2
    ledger = with_findings[0]
    expected = [f["check"] for f in truth["findings"] if f.get("ledger_id") == ledger]

    code = main(["check", "--estate", str(estate), "--system", "bookkeeper", "--subject", str(ledger), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert summary["run"]["scope"]["subjects"] == [str(ledger)]
    run = [r for r in list_runs(open_store(load_estate(str(estate)).store.uri), "incident")
           if r.run_id == summary["run_id"]][0]
    raw = [o["key"].split("/raw/bookkeeper/bk-i/", 1)[1] for o in run.manifest["objects"]
           if "/raw/bookkeeper/bk-i/" in o["key"]]
    from audit.systems.bookkeeper.system import ledger_of_key

    assert {ledger_of_key(k) for k in raw} - {None} == {str(ledger)}      # that ledger's evidence only
    assert any(k.startswith("ledger-metadata/") for k in raw)
    lab = summary["lab"]
    assert (lab["missed"], lab["false_alarms"], lab["wrong_count"]) == (0, 0, 0), lab
    assert lab["injected"] == lab["detected"] == len(expected)
    assert sorted(summary["counts"]["by_check"]) == sorted(set(expected))
    assert code in (1, 3)


class _Discard:
    def put(self, key: str, data: bytes) -> None:
        pass
