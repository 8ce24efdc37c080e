"""The estate's `lab:` block for a BookKeeper cluster, validated into LabConfig.

    lab:
      seed: 7                  # same seed + same as_of -> same cluster, payloads and ground truth
      ledgers: 60              # all ledgers, fault ledgers included
      bookies: 12
      racks: 3
      entries_per_ledger: 1000 # mean; each ledger draws from [1/3, 5/3] of it
      open_ledger_max_age_s: 21600   # age above which an OPEN ledger is reported (estate default 6h)
      db_ledger_storage_percent: 50  # share of bookies on DbLedgerStorage (Pulsar's default), the rest
                                     # SortedLedgerStorage; spread evenly over the bookie ids
      location_index_percent: 50     # share of the DbLedgerStorage bookies whose location index is read on
                                     # their host; the others are checked with read probes
      read_probe_percent: 100        # auditorLedgerVerificationPercentage of those read probes
      faults:                  # optional; DEFAULT_FAULTS when absent, [] for a healthy cluster
        - {kind: bookie_crash, ago_min: 300, ledgers_before: 2, ledgers_across: 3}
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from audit.systems.bookkeeper.domain.evidence import ENTRIES_OF_LEDGER, LOCATION_INDEX, READ_PROBE

SOURCE = "lab config"
DEFAULTS = {"seed": 1, "ledgers": 60, "bookies": 12, "racks": 3, "entries_per_ledger": 1000,
            "open_ledger_max_age_s": 6 * 3600, "db_ledger_storage_percent": 50,
            "location_index_percent": 50, "read_probe_percent": 100}
MINIMUMS = {"seed": 0, "ledgers": 1, "bookies": 6, "racks": 2, "entries_per_ledger": 3, "open_ledger_max_age_s": 1,
            "db_ledger_storage_percent": 0, "location_index_percent": 0, "read_probe_percent": 0}
PERCENT_KEYS = ("db_ledger_storage_percent", "location_index_percent", "read_probe_percent")
DB_LEDGER_STORAGE, SORTED_LEDGER_STORAGE = "DbLedgerStorage", "SortedLedgerStorage"

# kind -> {param: default}. "bookie" (an id) is optional where present: picked from the seed when absent.
FAULT_PARAMS: dict[str, dict[str, Any]] = {
    "bookie_crash": {"bookie": None, "ago_min": 300, "ledgers_before": 2, "ledgers_across": 3},
    "ensemble_change": {"bookie": None, "ago_min": 240, "down_min": 5, "ledgers": 3},
    "bookie_readonly": {"bookie": None, "ago_min": 120, "ledgers": 1},
    "replaced_ensemble_race": {"ledgers": 1, "in_flight": 2},
    "disk_loss": {"bookie": None, "ago_min": 60, "ledgers": 3},
    "unreachable_bookie": {"bookie": None, "ledgers": 2},
    "closed_without_data": {"ledgers": 1},
    "open_ledger_writing": {"ledgers": 2},
    "open_ledger_abandoned": {"ledgers": 1, "age_hours": 72},
    "placement_violation": {"ledgers": 1},
    # Production behaviours that must give no finding (lab/bookkeeper/production.py)
    "slow_bookie": {"bookie": None, "ago_min": 200, "ledgers": 2},
    "rereplication": {"bookie": None, "ago_min": 180, "down_min": 60, "ledgers": 2},
    # closed just before the snapshot: its tail is still in a location-index bookie's write cache
    "recently_closed": {"ledgers": 1, "closed_s_ago": 5},
}
BOOKIE_FAULTS = tuple(k for k, p in FAULT_PARAMS.items() if "bookie" in p)
PRODUCTION_KINDS = ("slow_bookie", "rereplication", "recently_closed")
DEFAULT_FAULTS: list[dict[str, Any]] = [{"kind": kind} for kind in FAULT_PARAMS]
# Each bookie fault takes a bookie of its own and ordinary ledgers need a few more: a small lab's default set
# leaves out the production behaviours (they stay available by name), as does a lab with too few ledgers for them
# (labs sized to the faults' ledgers predate some behaviours).
MIN_BOOKIES_FOR_ALL_DEFAULTS = 10
_PARAM_MINIMUMS = {"ago_min": 1, "down_min": 1, "in_flight": 1, "age_hours": 1, "closed_s_ago": 1}


class LabConfigError(ValueError):
    """The lab block is unusable: `source` names where it came from, `field` the key, `expected` what fits."""

    def __init__(self, source: str, field: str, expected: str, got: Any = None):
        self.source, self.field, self.expected, self.got = source, field, expected, got
        super().__init__(f"{source}: field {field}: expected {expected}, got {got!r}")


@dataclass(frozen=True)
class FaultSpec:
    kind: str
    params: dict[str, Any]
    index: int  # position in the faults list: names it in errors and ground truth

    def __getitem__(self, key: str) -> Any:
        return self.params[key]


@dataclass(frozen=True)
class LabConfig:
    seed: int
    ledgers: int
    bookies: int
    racks: int
    entries_per_ledger: int
    open_ledger_max_age_s: int
    db_ledger_storage_percent: int = DEFAULTS["db_ledger_storage_percent"]
    location_index_percent: int = DEFAULTS["location_index_percent"]
    read_probe_percent: int = DEFAULTS["read_probe_percent"]
    faults: tuple[FaultSpec, ...] = field(default_factory=tuple)


def _int(where: str, value: Any, minimum: int, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise LabConfigError(source, where, f"an integer >= {minimum}", value)
    return value


def parse_lab_config(cfg: Any, source: str = SOURCE) -> LabConfig:
    if cfg is None:
        cfg = {}
    if not isinstance(cfg, dict):
        raise LabConfigError(source, "lab", "a mapping", cfg)
    unknown = sorted(set(cfg) - set(DEFAULTS) - {"faults"})
    if unknown:
        raise LabConfigError(source, f"lab.{unknown[0]}", f"one of {sorted([*DEFAULTS, 'faults'])}", unknown[0])
    values = {k: _int(f"lab.{k}", cfg[k], MINIMUMS[k], source) if cfg.get(k) is not None else d
              for k, d in DEFAULTS.items()}
    raw_faults = cfg.get("faults")
    if raw_faults is None:
        raw_faults = _default_faults(values["bookies"], values["ledgers"])
    if not isinstance(raw_faults, list):
        raise LabConfigError(source, "lab.faults", "a list of {kind: ...} mappings", raw_faults)
    for key in PERCENT_KEYS:
        if values[key] > 100:
            raise LabConfigError(source, f"lab.{key}", "an integer from 0 to 100", values[key])
    faults = tuple(_fault(i, f, values["bookies"], source) for i, f in enumerate(raw_faults))
    picked = [f["bookie"] for f in faults if f.params.get("bookie")]
    dup = sorted({b for b in picked if picked.count(b) > 1})
    if dup:
        raise LabConfigError(source, "lab.faults[].bookie", "a different bookie for each bookie fault", dup[0])
    return LabConfig(faults=faults, **values)


def _ledgers_of(kind: str) -> int:
    p = FAULT_PARAMS[kind]
    return p.get("ledgers", 0) + p.get("ledgers_before", 0) + p.get("ledgers_across", 0)


def _default_faults(bookies: int, ledgers: int) -> list[dict[str, Any]]:
    """Every fault kind; production behaviours only with enough bookies, and in order while their ledgers fit."""
    used = sum(_ledgers_of(f["kind"]) for f in DEFAULT_FAULTS if f["kind"] not in PRODUCTION_KINDS)
    out = []
    for f in DEFAULT_FAULTS:
        if f["kind"] in PRODUCTION_KINDS:
            if bookies < MIN_BOOKIES_FOR_ALL_DEFAULTS or used + _ledgers_of(f["kind"]) > ledgers:
                continue
            used += _ledgers_of(f["kind"])
        out.append(f)
    return out


def _fault(i: int, raw: Any, bookies: int, source: str) -> FaultSpec:
    where = f"lab.faults[{i}]"
    if not isinstance(raw, dict):
        raise LabConfigError(source, where, "a mapping with a kind", raw)
    kind = raw.get("kind")
    if kind not in FAULT_PARAMS:
        raise LabConfigError(source, f"{where}.kind", f"one of {sorted(FAULT_PARAMS)}", kind)
    allowed = FAULT_PARAMS[kind]
    params = dict(allowed)
    for key, value in raw.items():
        if key == "kind":
            continue
        if key not in allowed:
            raise LabConfigError(source, f"{where}.{key}", f"a parameter of {kind}: {sorted(allowed)}", key)
        if key == "bookie":
            if value is not None and value not in bookie_ids(bookies):
                raise LabConfigError(source, f"{where}.bookie", f"a lab bookie id like {bookie_id(1)}", value)
            params[key] = value
        else:
            params[key] = _int(f"{where}.{key}", value, _PARAM_MINIMUMS.get(key, 0), source)
    if kind in ("ensemble_change", "rereplication") and params["down_min"] >= params["ago_min"]:
        raise LabConfigError(source, f"{where}.down_min", f"less than ago_min ({params['ago_min']}): the bookie is "
                             "back before the snapshot", params["down_min"])
    return FaultSpec(kind, params, i)


def bookie_id(n: int) -> str:
    return f"bookie-{n:02d}.lab:3181"


def bookie_ids(count: int) -> list[str]:
    return [bookie_id(n) for n in range(1, count + 1)]


def _picked(n: int, percent: int) -> bool:
    """Whether the n-th (1-based) of a row is in a share spread evenly over the row (n = 2, 4, 6, ... at 50 %)."""
    return n * percent // 100 > (n - 1) * percent // 100


def storage_of(n: int, db_percent: int) -> str:
    """Bookie n's ledger storage."""
    return DB_LEDGER_STORAGE if _picked(n, db_percent) else SORTED_LEDGER_STORAGE


def evidence_of(n: int, cfg: "LabConfig") -> str:
    """How the audit learns bookie n's entries: GetListOfEntriesOfLedger (SortedLedgerStorage answers it), else
    the location index read on the bookie's host (every other DbLedgerStorage bookie at 50 %), else read probes."""
    if not _picked(n, cfg.db_ledger_storage_percent):
        return ENTRIES_OF_LEDGER
    k = sum(_picked(m, cfg.db_ledger_storage_percent) for m in range(1, n + 1))  # its place among DB bookies
    return LOCATION_INDEX if _picked(k, cfg.location_index_percent) else READ_PROBE


def rack_of(n: int, racks: int) -> str:
    return f"/lab-dc/rack-{(n - 1) % racks + 1}"
