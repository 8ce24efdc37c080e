"""bk_ledgers' effective creation time (docs/bookkeeper/contracts.md), as LedgerMetadataSerDe.parseVersion2/3Config:
a stored ctime field wins whatever its value (<= 0, as the real v3 test vector's -1: unknown, never the znode's
ctime); without the field, the znode's ctime from its ZooKeeper Stat for format v2/v3; else unknown."""
import base64
import json
from pathlib import Path

import pytest

from audit.systems.bookkeeper.domain.model import OPEN
from audit.systems.bookkeeper.formats.ledger_metadata import encode_znode
from audit.systems.bookkeeper.transforms import normalize as T
from tests.bookkeeper.domain.cases import ledger

V3 = base64.b64decode((Path(__file__).resolve().parents[2] / "fixtures" / "real" / "bk-ledgermetadata-znode-v3.b64")
                      .read_text())
ZNODE_CTIME = 1_690_000_000_000
ENSEMBLE = ["bk1:3181", "bk2:3181"]


def _stat(ctime: int) -> bytes:
    return json.dumps({"czxid": 1, "mzxid": 1, "ctime": ctime, "mtime": ctime, "version": 0, "cversion": 0,
                       "aversion": 0, "ephemeralOwner": 0, "dataLength": 10, "numChildren": 0, "pzxid": 1}).encode()


def _admin(ledger_id: int, ctime: int) -> bytes:
    bean = {"metadataFormatVersion": 3, "ensembleSize": 2, "writeQuorumSize": 2, "ackQuorumSize": 1, "ctoken": 0,
            "ctime": ctime, "state": "OPEN", "closed": False, "length": 0, "lastEntryId": -1, "digestType": "CRC32C",
            "password": "", "customMetadata": {},
            "allEnsembles": {"0": [{"id": "bk1:3181"}, {"id": "bk2:3181"}]}}
    return json.dumps({str(ledger_id): bean}).encode()


CASES = {
    # ledger id: (files under ledger-metadata[-http]/, expected (stored_ctime, znode_ctime, ctime, ctime_source))
    20: ({"00/0000/L0020": V3, "00/0000/L0020.stat.json": _stat(ZNODE_CTIME)},
         (-1, ZNODE_CTIME, None, None)),                    # real v3: its stored -1 wins over the Stat (hasCtime)
    21: ({"00/0000/L0021": V3}, (-1, None, None, None)),                           # real v3, no Stat: unknown
    22: ({"00/0000/L0022": encode_znode(ledger({0: ENSEMBLE}, -1, state=OPEN, ledger_id=22, ctime=555)),
          "00/0000/L0022.stat.json": _stat(ZNODE_CTIME)}, (555, ZNODE_CTIME, 555, "metadata")),  # stored wins
    23: ({"00/0000/L0023": encode_znode(ledger({0: ENSEMBLE}, -1, state=OPEN, ledger_id=23), version=2),
          "00/0000/L0023.stat.json": _stat(ZNODE_CTIME)}, (None, ZNODE_CTIME, ZNODE_CTIME, "znode")),  # v2
    24: ({"00/0000/L0024": encode_znode(ledger({0: ENSEMBLE}, -1, state=OPEN, ledger_id=24), version=1),
          "00/0000/L0024.stat.json": _stat(ZNODE_CTIME)}, (None, ZNODE_CTIME, None, None)),  # v1 never uses it
    25: ({"00/0000/L0025": V3, "00/0000/L0025.stat.json": b'{"ctime": 5}'}, (-1, None, None, None)),  # bad Stat
    26: ({"00/0000/L0026": V3, "00/0000/L0026.stat.json": _stat(0)}, (-1, None, None, None)),  # Stat ctime not a time
    27: ({"00/0000/L0027": encode_znode(ledger({0: ENSEMBLE}, -1, state=OPEN, ledger_id=27)),
          "00/0000/L0027.stat.json": _stat(ZNODE_CTIME)}, (None, ZNODE_CTIME, ZNODE_CTIME, "znode")),  # v3, no field
    28: ({"00/0000/L0028": encode_znode(ledger({0: ENSEMBLE}, -1, state=OPEN, ledger_id=28, ctime=0)),
          "00/0000/L0028.stat.json": _stat(ZNODE_CTIME)}, (0, ZNODE_CTIME, None, None)),  # stored 0: unknown too
    29: ({"00/0000/L0029": encode_znode(ledger({0: ENSEMBLE}, -1, state=OPEN, ledger_id=29, ctime=-1), version=2),
          "00/0000/L0029.stat.json": _stat(ZNODE_CTIME)}, (-1, ZNODE_CTIME, None, None)),  # v2 field present: same
}
HTTP = {30: (1_600_000_000_000, 1_600_000_000_000, "metadata"), 31: (-1, None, None)}


@pytest.fixture(scope="module")
def ledgers(spark, tmp_path_factory):
    raw = tmp_path_factory.mktemp("ctime") / "raw"
    c = raw / "bookkeeper" / "bk-a"
    files = {f"ledger-metadata/{k}": v for paths, _ in CASES.values() for k, v in paths.items()}
    files |= {f"ledger-metadata-http/{lid}.json": _admin(lid, stored) for lid, (stored, _, _) in HTTP.items()}
    for key, data in files.items():
        (c / key).parent.mkdir(parents=True, exist_ok=True)
        (c / key).write_bytes(data)
    out = T.normalize(spark, str(raw))
    try:
        return ({r["ledger_id"]: r.asDict() for r in out["bk_ledgers"].collect()},
                [r.asDict() for r in out["quarantine"].collect()], out["bk_ledgers"].schema)
    finally:
        out.unpersist()


@pytest.mark.parametrize("lid", sorted(CASES))
def test_effective_ctime_of_znodes(ledgers, lid):
    r = ledgers[0][lid]
    assert (r["stored_ctime"], r["znode_ctime"], r["ctime"], r["ctime_source"]) == CASES[lid][1]


@pytest.mark.parametrize("lid", sorted(HTTP))
def test_admin_http_ctime_is_already_the_effective_one(ledgers, lid):
    r = ledgers[0][lid]
    assert (r["stored_ctime"], r["ctime"], r["ctime_source"], r["znode_ctime"]) == HTTP[lid] + (None,)


def test_a_bad_stat_is_quarantined_naming_the_field(ledgers):
    (q,) = ledgers[1]
    assert q["source_key"].endswith("L0025.stat.json") and q["payload_kind"] == "ledger-metadata-stat"
    assert "field czxid:" in q["reason"]


def test_schema(ledgers):
    assert ledgers[2].simpleString() == T.LEDGERS.simpleString()
