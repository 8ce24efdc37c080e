"""decode_file on the raw kinds issue 8 added: ZooKeeper Stat, location index, read probes -- good and bad input."""
import json

import pytest

from audit.systems.bookkeeper.formats.availability import encode_entries
from audit.systems.bookkeeper.transforms.decode import decode_file

K = "raw/bookkeeper/bk-a/"
STAT = {"czxid": 5, "mzxid": 6, "ctime": 1_690_000_000_000, "mtime": 1_690_000_000_001, "version": 0, "cversion": 0,
        "aversion": 0, "ephemeralOwner": 0, "dataLength": 120, "numChildren": 0, "pzxid": 5}
INVENTORY = {"bookie": "bk1:3181", "evidence": "location_index", "ledger_dirs": ["/data/ledgers"],
             "databases": ["/data/ledgers/current/locations"], "opened_as": "read_only", "read_at_ms": 1,
             "ledgers": 2, "entries": 30, "complete": True, "ledger_ids": None}
PROBE_BOOKIE = {"bookie": "bk1:3181", "evidence": "read_probe", "share_percent": 10, "reason": "list unanswered"}
PROBES = {"ledger_id": 7, "share_percent": 10, "probed": 6, "present": [[0, 1], [5, 5]],
          "absent": {"ENOENTRY": [9], "ENOLEDGER": [3]}, "failed": {"timeout": [11]}}


def _j(doc) -> bytes:
    return json.dumps(doc).encode()


def _one(key, data):
    rows = decode_file(K + key, data)
    return rows


def test_stat_gives_the_znode_ctime_keyed_by_the_ledger_of_the_path():
    assert _one("ledger-metadata/00/0000/L0007.stat.json", _j(STAT)) == [
        ("_znode_stats", {"cluster": "bk-a", "ledger_id": 7, "znode_ctime": 1_690_000_000_000,
                          "znode_mtime": STAT["mtime"], "source_key": K + "ledger-metadata/00/0000/L0007.stat.json"})]
    (row,) = _one("ledger-metadata/L0000000008.stat.json", _j(STAT | {"ctime": 0}))
    assert row[1]["ledger_id"] == 8 and row[1]["znode_ctime"] is None     # not a time: unknown


def test_location_index_file_is_a_list_answer():
    ((table, row),) = _one("location-index/bk1:3181/7.avail", encode_entries([0, 1, 3, 4, 6, 7]))
    assert table == "bk_entry_availability"
    assert (row["bookie"], row["ledger_id"], row["status"], row["evidence"], row["absent"]) == (
        "bk1:3181", 7, "ok", "location_index", None)
    assert row["groups"] == [{"first_sequence_start": 0, "last_sequence_start": 6, "sequence_size": 2,
                              "sequence_period": 3}]   # canonical, like the list answers


def test_list_answers_say_their_evidence():
    from audit.systems.bookkeeper.formats.protocol import encode_response
    ((_, row),) = _one("entries-of-ledger/bk1:3181/7.pb", encode_response(1, 7, "EOK", encode_entries([0])))
    assert row["evidence"] == "entries_of_ledger"


def test_read_probes_row():
    ((table, row),) = _one("read-probes/bk1:3181/7.json", _j(PROBES))
    assert table == "bk_entry_availability"
    assert (row["status"], row["evidence"], row["probe_share"], row["probed"], row["absent"], row["groups"]) == (
        "ok", "read_probe", 10, 6, [3, 9], None)


def test_read_probes_that_all_failed_are_unavailable():
    doc = {"ledger_id": 7, "share_percent": 10, "probed": 3, "present": [], "absent": {},
           "failed": {"timeout": [1], "EIO": [2, 4]}}
    ((_, row),) = _one("read-probes/bk1:3181/7.json", _j(doc))
    assert (row["status"], row["error"]) == ("unavailable", "every read probe failed: EIO x2, timeout x1")


@pytest.mark.parametrize("key, doc, evidence, complete, share", [
    ("location-index/bk1:3181/inventory.json", INVENTORY, "location_index", True, None),
    ("location-index/bk1:3181/inventory.json", INVENTORY | {"complete": False, "ledger_ids": [7]}, "location_index",
     False, None),
    ("read-probes/bk1:3181/bookie.json", PROBE_BOOKIE, "read_probe", False, 10),
])
def test_bookie_evidence_rows(key, doc, evidence, complete, share):
    ((table, row),) = _one(key, _j(doc))
    assert table == "bk_bookie_evidence"
    assert (row["cluster"], row["bookie"], row["evidence"], row["complete"], row["share_percent"]) == (
        "bk-a", "bk1:3181", evidence, complete, share)
    assert row["reason"] and row["source_key"] == K + key
    assert row["ledger_ids"] == doc.get("ledger_ids")


def _bad(key, data, field):
    """Bad input: a quarantine row naming the source and the field; for a ledger's evidence also an error row."""
    rows = _one(key, data)
    (q,) = [r for t, r in rows if t == "quarantine"]
    assert q["source_key"] == K + key and f"field {field}:" in q["reason"] and "expected" in q["reason"], q["reason"]
    return [r for t, r in rows if t != "quarantine"]


@pytest.mark.parametrize("doc, field", [
    (b"{not json", "<root>"),
    (_j([1]), "<root>"),
    (_j({k: v for k, v in STAT.items() if k != "pzxid"}), "pzxid"),
    (_j(STAT | {"ctime": "yesterday"}), "ctime"),
    (_j(STAT | {"version": True}), "version"),
])
def test_bad_stat_is_quarantined(doc, field):
    assert _bad("ledger-metadata/00/0000/L0007.stat.json", doc, field) == []


def test_stat_beside_a_path_that_is_no_ledger():
    assert _bad("ledger-metadata/idgen/ID-01.stat.json", _j(STAT), "key") == []


@pytest.mark.parametrize("doc, field", [
    (_j(PROBES | {"ledger_id": 8}), "ledger_id"),
    (_j(PROBES | {"share_percent": 101}), "share_percent"),
    (_j(PROBES | {"probed": 7}), "probed"),                            # 3 present + 2 absent + 1 failed = 6
    (_j(PROBES | {"present": [[1, 0]]}), "present[0]"),
    (_j(PROBES | {"present": [[4, 5], [0, 1]]}), "present[1]"),         # not ascending
    (_j(PROBES | {"absent": {"EIO": [9]}}), "absent"),                 # EIO is a failure, never "absent"
    (_j(PROBES | {"absent": {"ENOENTRY": [-1]}}), "absent.ENOENTRY"),
    (_j(PROBES | {"failed": [11]}), "failed"),
    (_j({k: v for k, v in PROBES.items() if k != "present"}), "present"),
    (b"[]", "<root>"),
])
def test_bad_read_probes_leave_the_bookie_unknown(doc, field):
    (row,) = _bad("read-probes/bk1:3181/7.json", doc, field)
    assert (row["status"], row["evidence"], row["ledger_id"]) == ("error", "read_probe", 7)


def test_bad_location_index_bytes_leave_the_bookie_unknown():
    (row,) = _bad("location-index/bk1:3181/7.avail", b"\x00\x01", "header")
    assert (row["status"], row["evidence"]) == ("error", "location_index")


@pytest.mark.parametrize("key, doc, field", [
    ("location-index/bk1:3181/inventory.json", INVENTORY | {"bookie": "bk2:3181"}, "bookie"),
    ("location-index/bk1:3181/inventory.json", INVENTORY | {"evidence": "read_probe"}, "evidence"),
    ("location-index/bk1:3181/inventory.json", INVENTORY | {"complete": "yes"}, "complete"),
    ("location-index/bk1:3181/inventory.json", INVENTORY | {"opened_as": "read_write"}, "opened_as"),
    ("location-index/bk1:3181/inventory.json", INVENTORY | {"ledger_ids": ["7"]}, "ledger_ids"),
    ("location-index/bk1:3181/inventory.json", {k: v for k, v in INVENTORY.items() if k != "databases"},
     "databases"),
    ("read-probes/bk1:3181/bookie.json", PROBE_BOOKIE | {"share_percent": -1}, "share_percent"),
    ("read-probes/bk1:3181/bookie.json", {k: v for k, v in PROBE_BOOKIE.items() if k != "reason"}, "reason"),
])
def test_bad_bookie_evidence_is_quarantined(key, doc, field):
    assert _bad(key, _j(doc), field) == []


@pytest.mark.parametrize("key, kind", [
    ("location-index/bk1:3181/x7.avail", "location-index"),
    ("location-index/bk1:3181/sub/7.avail", "location-index"),
    ("read-probes/bk1:3181/7.txt", "read-probes"),
    ("read-probes/bookie.json", "read-probes-bookie"),
])
def test_bad_keys_are_quarantined(key, kind):
    assert _bad(key, b"{}", "key") == []
    ((_, q),) = _one(key, b"{}")
    assert (q["system"], q["cluster"], q["payload_kind"]) == ("bookkeeper", "bk-a", kind)


def test_deletion_note_names_the_ledger_of_its_path_or_is_quarantined():
    note = {"ledger_id": 7, "checked_at_ms": 1, "reason": "gone"}
    assert _one("ledger-metadata/00/0000/L0007.deleted.json", _j(note)) == [
        ("_deleted_ledgers", {"cluster": "bk-a", "ledger_id": 7,
                              "source_key": K + "ledger-metadata/00/0000/L0007.deleted.json"})]
    ((table, row),) = _one("ledger-metadata/00/0000/L0007.deleted.json", _j(note | {"ledger_id": 8}))
    assert table == "quarantine" and "ledger_id" in row["reason"] and "7 (from the key)" in row["reason"]
