"""The estate file is composed from the registry: every system brings its cluster model (systems.<name>) and its
thresholds (flat keys of `thresholds:`)."""
import pytest

from audit import systems
from audit.systems.bookkeeper.collect.collector import parse_cluster
from audit.config import EstateError
from audit.config.estate import estate_schema, parse_estate
from audit.config.values import Name, Record, choice, integer, record
from audit.contracts import Pipeline, System, SystemConfig

HEAD = "estate: e\nstore: {uri: file:///tmp/replaudit-x}\n"

Source = choice("lab", "broker")
LagMax = integer(0)


@record
class ToyCluster(Record):
    name: Name
    source: Source
    partitions: LagMax = 1


@record
class ToyThresholds(Record):
    toy_lag_max: LagMax = 100


def _toy_system(thresholds=ToyThresholds, name="toy") -> System:
    return System(name=name, title="Toy", checks={}, config=SystemConfig(ToyCluster, thresholds),
                  pipeline=Pipeline(collect=lambda req: None, normalize=lambda *a: {}, audit=lambda *a: {}),
                  report=None)


@pytest.fixture
def toy():
    systems.register(_toy_system())
    yield
    systems.unregister("toy")


def test_a_registered_system_gets_its_section_thresholds_and_schema(toy):
    estate = parse_estate(HEAD + "thresholds: {toy_lag_max: 7, open_ledger_max_age: 1h}\n"
                                 "systems:\n  toy: [{name: t1, source: broker, partitions: 3}]\n")
    [t1] = estate.clusters("toy")
    assert (t1.name, t1.source, t1.partitions) == ("t1", "broker", 3)
    assert estate.thresholds.toy_lag_max == 7 and estate.thresholds.open_ledger_max_age_s == 3600
    assert estate.systems["toy"] == (t1,) and estate.clusters("pulsar") == ()
    schema = estate_schema()
    assert "toy" in schema["$defs"]["Systems"]["properties"]
    assert "toy_lag_max" in schema["$defs"]["Thresholds"]["properties"]


def test_rules_across_systems_apply_to_a_registered_system(toy):
    with pytest.raises(EstateError) as info:
        parse_estate(HEAD + "systems:\n  bookkeeper: [{name: same, source: lab}]\n  toy: [{name: same, source: lab}]\n")
    assert info.value.field == "systems.toy[0].name" and "unique across systems" in info.value.message
    with pytest.raises(EstateError) as info:
        parse_estate(HEAD + "systems:\n  toy: [{name: t1, source: lab, partitons: 2}]\n")
    assert info.value.field == "systems.toy[0].partitons" and "did you mean 'partitions'?" in info.value.message


def test_unregistered_system_is_unknown():
    estate = parse_estate(HEAD + "systems: {}\n")
    assert estate.clusters("bookkeeper") == () and set(estate.systems) >= {"bookkeeper", "pulsar"}
    with pytest.raises(KeyError, match="no system 'toy'"):
        estate.clusters("toy")
    with pytest.raises(EstateError) as info:
        parse_estate(HEAD + "systems: {toy: []}\n")
    assert info.value.field == "systems.toy" and "unknown key 'toy'" in info.value.message


def test_two_systems_may_not_claim_the_same_threshold():
    @record
    class Clash(Record):
        min_racks_per_write_quorum: LagMax = 1

    systems.register(_toy_system(Clash, name="clash"))
    try:
        with pytest.raises(TypeError, match="min_racks_per_write_quorum"):
            parse_estate(HEAD + "systems: {}\n")
    finally:
        systems.unregister("clash")


def test_bookkeeper_bookie_window_reaches_the_collector_and_typos_are_suggested():
    estate = parse_estate(HEAD + "systems:\n  bookkeeper:\n    - {name: bk, source: zookeeper, "
                                 "zookeeper: {hosts: 'zk:2181'}, bookie_window: 7}\n")
    assert parse_cluster(estate.cluster("bookkeeper", "bk")).bookie.window == 7
    with pytest.raises(EstateError) as info:
        parse_estate(HEAD + "systems:\n  bookkeeper:\n    - {name: bk, source: lab, bookie_windw: 7}\n")
    assert info.value.field == "systems.bookkeeper[0].bookie_windw"
    assert "did you mean 'bookie_window'?" in info.value.message


def test_null_is_the_default():
    estate = parse_estate(HEAD + "spark: null\nthresholds: {pulsar_snapshot_max_age: null}\n"
                                 "systems:\n  bookkeeper: [{name: bk, source: lab, timeouts: null, lab: null}]\n"
                                 "  pulsar: null\n")
    [bk] = estate.clusters("bookkeeper")
    assert (bk.timeouts.connect_s, bk.lab) == (5.0, {})
    assert estate.thresholds.pulsar_snapshot_max_age_s == 300 and estate.clusters("pulsar") == ()
