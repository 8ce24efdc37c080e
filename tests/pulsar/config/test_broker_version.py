"""`broker_version` of a Pulsar cluster: a release or a MAJOR.MINOR.x line, refused where the line alone does not
say which snapshot cache the brokers run (the rule changed at a patch release, apache/pulsar#25044)."""
import pytest

from audit.config import EstateError
from audit.config.estate import parse_estate

HEAD = "estate: geo\nstore: {uri: file:///tmp/replaudit-x}\nsystems:\n  pulsar:\n"
ADMIN = "    - {name: east, source: admin, admin_url: 'https://east:8443', topics: ['persistent://t/n/x']"


def _parse(extra: str):
    return parse_estate(HEAD + ADMIN + extra + "}\n").cluster("pulsar", "east")


@pytest.mark.parametrize("value", ["3.0.x", "3.0.4", "4.0.9", "4.2.x", "4.1.3-SNAPSHOT"])
def test_accepted(value):
    assert _parse(f", broker_version: '{value}'").broker_version == value


def test_unset_is_none():
    assert _parse("").broker_version is None


@pytest.mark.parametrize("value, expected", [
    ("4.0.x", "the patch release on the 4.0 and 4.1 lines"), ("latest", "a broker release"),
    ("3", "a broker release"), ("3.0.4x", "a broker release")])
def test_refused_names_the_field(value, expected):
    with pytest.raises(EstateError) as info:
        _parse(f", broker_version: '{value}'")
    assert info.value.field == "systems.pulsar[0].broker_version" and expected in info.value.message
