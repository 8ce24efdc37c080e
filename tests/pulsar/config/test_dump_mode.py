"""The Pulsar dump mode keys (dump.mode, service_url) and did-you-mean on a Pulsar key; the collector reads them
from the validated cluster as they are."""
import pytest

from audit.systems.pulsar.collect.collector import PulsarCollector
from audit.systems.pulsar.collect.reader import PulsarClientReaderSource
from audit.config import EstateError
from audit.config.estate import parse_estate
from audit.systems.pulsar.config import PulsarDump

HEAD = "estate: geo\nstore: {uri: file:///tmp/replaudit-x}\nsystems:\n  pulsar:\n"
ADMIN = "    - {name: east, source: admin, admin_url: 'https://east:8443', topics: ['persistent://t/n/x']"


def _cluster(extra: str):
    return parse_estate(HEAD + ADMIN + extra + "}\n").cluster("pulsar", "east")


def _error(extra: str) -> EstateError:
    with pytest.raises(EstateError) as info:
        parse_estate(HEAD + ADMIN + extra + "}\n")
    return info.value


def test_defaults_are_what_the_collector_assumed():
    east = _cluster("")
    assert east.dump == PulsarDump(concurrency=8, chunk_entries=1000, max_entries_per_topic=1_000_000, mode="admin")
    assert east.service_url is None
    assert PulsarCollector()._reader_for(east, "tok") is None  # admin mode: no Reader


def test_reader_mode_reaches_the_collector():
    east = _cluster(", service_url: 'pulsar+ssl://east:6651', dump: {mode: reader, concurrency: 2},"
                    " timeouts: {request_s: 12}")
    assert (east.dump.mode, east.dump.concurrency, east.service_url) == ("reader", 2, "pulsar+ssl://east:6651")
    reader = PulsarCollector()._reader_for(east, "tok")
    assert isinstance(reader, PulsarClientReaderSource)
    assert reader.service_url == "pulsar+ssl://east:6651"


@pytest.mark.parametrize("extra, field, expected", [
    (", dump: {mode: reader}", "systems.pulsar[0].service_url", "required for dump.mode: reader"),
    (", dump: {mode: fast}", "systems.pulsar[0].dump.mode", "one of admin | reader, got 'fast'"),
    (", service_url: 'http://east:8080'", "systems.pulsar[0].service_url", "pulsar:// or pulsar+ssl://"),
    (", dump: {concurency: 3}", "systems.pulsar[0].dump.concurency", "(did you mean 'concurrency'?)"),
    (", servce_url: 'pulsar://east:6650'", "systems.pulsar[0].servce_url", "(did you mean 'service_url'?)"),
])
def test_bad_dump_mode_keys_name_the_field(extra, field, expected):
    err = _error(extra)
    assert err.field == field, str(err)
    assert expected in err.message and ", got " in err.message


def test_service_url_credentials_are_not_echoed():
    err = _error(", service_url: 'pulsar://admin:hunter22@east:6650'")
    assert err.field == "systems.pulsar[0].service_url"
    assert "hunter22" not in str(err) and "without credentials" in err.message


def test_lab_clusters_take_no_service_url():
    with pytest.raises(EstateError) as info:
        parse_estate(HEAD + "    - {name: east, source: lab, service_url: 'pulsar://east:6650'}\n")
    assert info.value.field == "systems.pulsar[0].service_url" and "no service_url with source: lab" in str(info.value)
