"""raw/pulsar/<cluster>/broker-version.txt -> one pulsar_brokers row; a body that is not a version is quarantined."""
from __future__ import annotations

from audit.systems.pulsar.transforms.decode import BROKERS, QUARANTINE, decode_file

KEY = "raw/pulsar/east/broker-version.txt"


def test_the_bare_text_the_broker_sends_and_a_json_quoted_copy_decode_alike():
    row = {"cluster": "east", "broker_version": "3.0.12", "source_key": KEY}
    assert decode_file(KEY, b"3.0.12") == [(BROKERS, row)]
    assert decode_file(KEY, b'"3.0.12"\n') == [(BROKERS, row)]
    assert decode_file(KEY, b"4.1.0-SNAPSHOT")[0][1]["broker_version"] == "4.1.0-SNAPSHOT"


def test_a_proxy_page_is_quarantined_naming_the_key():
    [(table, row)] = decode_file(KEY, b"<html><title>502 Bad Gateway</title></html>")
    assert table == QUARANTINE and row["payload_kind"] == "broker-version" and row["reason"].startswith(KEY)
