"""A DbLedgerStorage bookie's location index lacks what its write cache has not flushed: a ledger written shortly
before the index was read (or after it) is not judged from that index. The rule as a table of cases, then through
spark_jobs/run.py on raw evidence: a bookie whose index was read 5 s after a ledger closed, and 5 minutes after
another, both indexes missing the same entries."""
import json

import pytest

from audit.systems.bookkeeper.domain.evidence import settled_in_index
from audit.systems.bookkeeper.formats.availability import encode_entries
from audit.systems.bookkeeper.formats.ledger_metadata import encode_znode
from audit.systems.bookkeeper.formats.protocol import encode_response
from spark_jobs import run
from tests.bookkeeper.domain.cases import expected_entries, ledger

READ_AT = 1_700_000_000_000
SETTLE = 60_000
ENSEMBLE = ["bk1:3181", "bk2:3181", "bk3:3181"]


@pytest.mark.parametrize("mtime, ctime, read_at, settled", [
    (READ_AT - 120_000, None, READ_AT, True),          # closed two minutes before the read: flushed long since
    (READ_AT - SETTLE, None, READ_AT, True),           # exactly the settle time
    (READ_AT - 5_000, None, READ_AT, False),           # closed 5 s before: may still be in the write cache
    (READ_AT + 30_000, None, READ_AT, False),          # written after the index was read (a host run done earlier)
    (None, READ_AT - 5_000, READ_AT, False),           # no Stat: the stored ctime bounds the ledger's start
    (None, READ_AT - 3_600_000, READ_AT, True),
    (READ_AT - 5_000, READ_AT - 3_600_000, READ_AT, False),   # the later of the two decides
    (None, None, READ_AT, True),                       # nothing to tell by: the index as it is
    (READ_AT - 5_000, None, None, True),               # no read instant either
])
def test_settled_in_index(mtime, ctime, read_at, settled):
    md = ledger({0: ENSEMBLE}, 9, ctime=ctime)
    assert settled_in_index(md, mtime, read_at, SETTLE) is settled


def _stat(mtime: int) -> bytes:
    fields = ("czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion", "ephemeralOwner", "dataLength",
              "numChildren", "pzxid")
    return json.dumps({f: 0 for f in fields} | {"ctime": mtime - 600_000, "mtime": mtime, "czxid": 7}).encode()


def test_a_ledger_closed_just_before_the_index_read_is_not_judged_from_it(spark, tmp_path):
    c = tmp_path / "raw" / "bookkeeper" / "bk-a"
    recent = ledger({0: ENSEMBLE}, 59, Qw=2, Qa=2, ledger_id=11)
    settled = ledger({0: ENSEMBLE}, 59, Qw=2, Qa=2, ledger_id=12)
    files = {"location-index/bk2:3181/inventory.json": json.dumps({
        "bookie": "bk2:3181", "evidence": "location_index", "ledger_dirs": ["/data/ledgers"],
        "databases": ["/data/ledgers/current/locations"], "opened_as": "read_only", "read_at_ms": READ_AT,
        "ledgers": 2, "entries": 60, "complete": True, "ledger_ids": None}).encode()}
    for md, mtime in ((recent, READ_AT - 5_000), (settled, READ_AT - 300_000)):
        i = md.ledger_id
        files[f"ledger-metadata/00/0000/L00{i}"] = encode_znode(md)
        files[f"ledger-metadata/00/0000/L00{i}.stat.json"] = _stat(mtime)
        for b in ("bk1:3181", "bk3:3181"):
            files[f"entries-of-ledger/{b}/{i}.pb"] = encode_response(
                1, i, "EOK", encode_entries(expected_entries(md, b)))
        # both indexes lack the ledger's last 10 entries on bk2
        files[f"location-index/bk2:3181/{i}.avail"] = encode_entries(
            [e for e in expected_entries(md, "bk2:3181") if e < 50])
    for key, data in files.items():
        (c / key).parent.mkdir(parents=True, exist_ok=True)
        (c / key).write_bytes(data)
    run.main(["--system", "bookkeeper", "--stage", "normalize", "--input", str(tmp_path / "raw"),
              "--output", str(tmp_path / "tables")])
    out = run.main(["--system", "bookkeeper", "--stage", "audit", "--input", str(tmp_path / "tables"),
                    "--output", str(tmp_path), "--run-id", "r", "--as-of-ms", str(READ_AT + 60_000)])
    metrics = {r["ledger_id"]: r
               for r in spark.read.parquet(str(tmp_path / "metrics" / "bk_ledger_replicas")).collect()}
    violations = spark.read.parquet(str(tmp_path / "findings" / "violations")).collect()
    missing = [e for e in expected_entries(settled, "bk2:3181") if e >= 50]
    # the settled ledger: its index speaks for it, the entries are missing (one copy left of each, Qa=2)
    assert [(v["subject"], v["check"], v["entry_count"]) for v in violations] == [
        ("ledger 12", "bk.entries_below_ack_quorum", len(missing))]
    assert out["violations_by_check"] == {"bk.entries_below_ack_quorum": 1}
    # the recent one: bk2 is unavailable for it tonight, nothing is counted missing
    assert (metrics[11]["unavailable_bookies"], metrics[11]["entries_below_write_quorum"]) == (1, 0)
    assert (metrics[12]["unavailable_bookies"], metrics[12]["least_replicas"]) == (0, 1)
    znode = {r["ledger_id"]: r["znode_mtime"]
             for r in spark.read.parquet(str(tmp_path / "tables" / "bk_ledgers")).collect()}
    assert znode == {11: READ_AT - 5_000, 12: READ_AT - 300_000}
