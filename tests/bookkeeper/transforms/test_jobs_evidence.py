"""spark_jobs/run.py over a raw folder with the issue-8 evidence: a DbLedgerStorage bookie's location index (complete
inventory), a read-probed bookie, a bookie holding entries outside the ensemble, an OPEN v3 znode without a stored
ctime with its ZooKeeper Stat, and the real v3 znode (ctime field present, -1: unknown even beside a Stat)."""
import base64
import json
from pathlib import Path

import pytest

from audit.systems.bookkeeper.formats.availability import encode_entries
from audit.systems.bookkeeper.formats.ledger_metadata import encode_znode
from audit.systems.bookkeeper.formats.protocol import encode_response
from spark_jobs import run
from audit.systems.bookkeeper.domain.model import OPEN
from tests.bookkeeper.domain.cases import expected_entries, ledger

V3 = (Path(__file__).resolve().parents[2] / "fixtures" / "real"
      / "bk-ledgermetadata-znode-v3.b64")   # TestLedgerMetadataSerDe
AS_OF = 1_700_000_000_000
DAY = 86_400_000
ENSEMBLE = ["bk1:3181", "bk2:3181", "bk3:3181"]


def _stat(ctime: int) -> bytes:
    fields = ("czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion", "ephemeralOwner", "dataLength",
              "numChildren", "pzxid")
    return json.dumps({f: 0 for f in fields} | {"ctime": ctime, "mtime": ctime, "czxid": 7}).encode()


def _raw(root: Path) -> Path:
    c = root / "raw" / "bookkeeper" / "bk-a"
    big = ledger({0: ENSEMBLE}, 99, Qw=2, Qa=2, ledger_id=3)
    small = ledger({0: ENSEMBLE}, 29, Qw=2, Qa=1, ledger_id=5)
    v3 = base64.b64decode(V3.read_text())
    files = {
        "ledger-metadata/00/0000/L0003": encode_znode(big),
        "ledger-metadata/00/0000/L0005": encode_znode(small),
        # OPEN without a stored ctime: the znode's ctime is the creation time; the real v3 vector stores ctime -1,
        # which wins over its Stat (LedgerMetadataSerDe.parseVersion3Config): unknown
        "ledger-metadata/00/0000/L0009": encode_znode(ledger({0: ENSEMBLE}, -1, state=OPEN, ledger_id=9)),
        "ledger-metadata/00/0000/L0009.stat.json": _stat(AS_OF - 10 * DAY),
        "ledger-metadata/00/0000/L0010": v3, "ledger-metadata/00/0000/L0010.stat.json": _stat(AS_OF - 10 * DAY),
        # bk1 answers GetListOfEntriesOfLedger
        "entries-of-ledger/bk1:3181/3.pb": encode_response(1, 3, "EOK",
                                                           encode_entries(expected_entries(big, "bk1:3181"))),
        "entries-of-ledger/bk1:3181/5.pb": encode_response(2, 5, "EOK",
                                                           encode_entries(expected_entries(small, "bk1:3181"))),
        # bk2 (DbLedgerStorage): its complete location index lost 40..59 of ledger 3 and holds nothing of ledger 5
        "location-index/bk2:3181/3.avail": encode_entries(
            [e for e in expected_entries(big, "bk2:3181") if not 40 <= e <= 59]),
        "location-index/bk2:3181/inventory.json": json.dumps({
            "bookie": "bk2:3181", "evidence": "location_index", "ledger_dirs": ["/data/ledgers"],
            "databases": ["/data/ledgers/current/locations"], "opened_as": "read_only", "read_at_ms": AS_OF,
            "ledgers": 1, "entries": 53, "complete": True, "ledger_ids": None}).encode(),
        # bk4 is in no ensemble but still holds entries 0..9 of ledger 3 (a bookie back after re-replication)
        "location-index/bk4:3181/3.avail": encode_entries(range(10)),
        "location-index/bk4:3181/inventory.json": json.dumps({
            "bookie": "bk4:3181", "evidence": "location_index", "ledger_dirs": ["/d"], "databases": ["/d/locations"],
            "opened_as": "secondary", "read_at_ms": AS_OF, "ledgers": 1, "entries": 10, "complete": True,
            "ledger_ids": None}).encode(),
        # bk3 (DbLedgerStorage, no host access): read probes at 50 %; entries 70 and 71 of ledger 3 are absent
        "read-probes/bk3:3181/bookie.json": json.dumps({
            "bookie": "bk3:3181", "evidence": "read_probe", "share_percent": 50,
            "reason": "GetListOfEntriesOfLedger unanswered within 2.0 s while a ReadRequest was answered"}).encode(),
        "read-probes/bk3:3181/3.json": json.dumps({
            "ledger_id": 3, "share_percent": 50, "probed": 7, "present": [[1, 2], [4, 5]],
            "absent": {"ENOENTRY": [70, 71]}, "failed": {"timeout": [7]}}).encode(),
        "read-probes/bk3:3181/5.json": json.dumps({
            "ledger_id": 5, "share_percent": 50, "probed": 2, "present": [[1, 2]], "absent": {},
            "failed": {}}).encode(),
    }
    for key, data in files.items():
        (c / key).parent.mkdir(parents=True, exist_ok=True)
        (c / key).write_bytes(data)
    return root / "raw"


@pytest.fixture(scope="module")
def outputs(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("attempt")
    counts = run.main(["--system", "bookkeeper", "--stage", "normalize", "--input", str(_raw(root)),
                       "--output", str(root / "tables")])
    out = run.main(["--system", "bookkeeper", "--stage", "audit", "--input", str(root / "tables"),
                    "--output", str(root), "--run-id", "r8", "--as-of-ms", str(AS_OF)])

    def rows(*parts):
        return [r.asDict(recursive=True) for r in spark.read.parquet(str(root.joinpath(*parts))).collect()]

    return counts, out, rows


def test_normalized_counts(outputs):
    counts, _, rows = outputs
    assert counts == {"bk_ledgers": 4, "bk_entry_availability": 6, "bk_bookies": 0, "bk_bookie_evidence": 3,
                      "quarantine": 0}
    ev = {r["bookie"]: (r["evidence"], r["complete"], r["share_percent"]) for r in rows("tables", "bk_bookie_evidence")}
    assert ev == {"bk2:3181": ("location_index", True, None), "bk4:3181": ("location_index", True, None),
                  "bk3:3181": ("read_probe", False, 50)}


def test_findings_follow_the_evidence(outputs):
    _, out, rows = outputs
    assert out["violations_by_check"] == {"bk.entries_below_ack_quorum": 1, "bk.entries_below_write_quorum": 1,
                                          "bk.ledger_open_too_long": 1}
    by = {(v["check"], v["subject"]): v for v in rows("findings", "violations")}
    # ledger 3: bk2's index lost 13 of its entries, bk3's probes found 70 and 71 absent -> 15 entries with 1 copy
    below_ack = by[("bk.entries_below_ack_quorum", "ledger 3")]
    assert below_ack["entry_count"] == 15
    assert "sampled evidence: read probes at 50 % on bk3:3181" in below_ack["message"]
    assert json.loads(below_ack["evidence"])["sampled"] == [{"bookie": "bk3:3181", "share_percent": 50, "probed": 7}]
    # ledger 5: bk2's complete inventory has no file for it -> NoSuchLedger: its 20 entries are missing
    assert by[("bk.entries_below_write_quorum", "ledger 5")]["entry_count"] == 20
    # ledger 9 has the znode's ctime (10 days ago); ledger 10's stored -1 says unknown: not judged
    assert ("bk.ledger_open_too_long", "ledger 9") in by


def test_fragments_metrics_and_outside_information(outputs):
    _, out, rows = outputs
    frags = sorted((f["ledger_id"], f["bookie"], f["missing_count"],
                    [(r["first"], r["last"]) for r in f["missing_ranges"]])
                   for f in rows("findings", "bk_missing_fragments"))
    assert frags == [(3, "bk2:3181", 13, [(40, 58)]), (3, "bk3:3181", 2, [(70, 71)]), (5, "bk2:3181", 20, [(0, 28)])]
    (info,) = rows("findings", "bk_outside_ensemble")
    assert (info["ledger_id"], info["bookie"], info["entry_count"], info["ranges"]) == (
        3, "bk4:3181", 10, [{"first": 0, "last": 9}])
    assert out["outside"] == 1
    m = {r["ledger_id"]: r for r in rows("metrics", "bk_ledger_replicas")}
    assert (m[3]["entries_outside_ensemble"], m[3]["unavailable_bookies"], m[5]["unavailable_bookies"]) == (10, 0, 0)
    assert (m[9]["ctime"], m[10]["ctime"]) == (AS_OF - 10 * DAY, None)
