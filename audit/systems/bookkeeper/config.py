"""BookKeeper's part of the estate: one entry of `systems.bookkeeper[]` and its `thresholds:` keys (docs/estate.md).
audit/systems/bookkeeper/system.py names these as the system's `cluster_model` / `thresholds_model`."""
from __future__ import annotations

import re
from typing import Annotated, ClassVar

from annotated_types import Ge, Gt, Le
from pydantic import AfterValidator, BeforeValidator, Field, Strict, ValidationInfo, WithJsonSchema, model_validator

from audit.config.model import Secret, Timeouts
from audit.config.durations import parse_duration
from audit.config.values import (DURATION_SCHEMA, Duration, HttpUrl, Name, Record, choice, expect, file_context,
                                 integer, lab_block, listing, record, rule_error, set_field, show, string_map, text)

SOURCES = ("lab", "zookeeper", "admin_http")
ZK_HOSTS_RE = re.compile(r"^[A-Za-z0-9_.\-]+:\d{1,5}(,[A-Za-z0-9_.\-]+:\d{1,5})*(/[^/\s]+)*$")
ZNODE_PATH_RE = re.compile(r"^(/[^/\s]+)+$")
HOST_PORT_RE = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")
RACK_RE = re.compile(r"^(/[^/\s]+)+$")
FAULT_KIND_RE = re.compile(r"^[a-z][a-z0-9_]*$")
LAB_INT_KEYS = ("seed", "ledgers", "bookies", "entries_per_ledger")
DEFAULT_LEDGERS_ROOT = "/ledgers"
DEFAULT_BOOKIE_WINDOW = 100  # requests in flight per bookie connection (the Auditor also uses 100)
DEFAULT_LIST_PROBE_TIMEOUT_S = 2.0  # wait for a bookie's first entry list before probing it with a read
LEDGER_DIR_RE = re.compile(r"^/[^\x00\n]*$")


def _ports_in_range(hosts: str) -> str:
    for host_port in hosts.split("/", 1)[0].split(","):
        if not 0 < int(host_port.rsplit(":", 1)[1]) < 65536:
            raise rule_error("ports between 1 and 65535", repr(hosts))
    return hosts


ZooKeeperHosts = Annotated[text(ZK_HOSTS_RE, "a connect string host:port[,host:port...][/chroot]"),
                           AfterValidator(_ports_in_range)]
ZnodePath = text(ZNODE_PATH_RE, "an absolute znode path like /ledgers (no trailing '/')")


@record
class ZooKeeperConfig(Record):
    """`hosts` is the kazoo/ZooKeeper connect string `h1:p1,h2:p2[/chroot]`."""

    hosts: ZooKeeperHosts
    ledgers_root: ZnodePath = DEFAULT_LEDGERS_ROOT
    digest_auth: Secret | None = None  # resolves to "user:password"


@record
class AdminHttpConfig(Record):
    """A bookie's admin HTTP server (bookie settings httpServerEnabled=true, httpServerPort, 8080 by default):
    source admin_http reads the ledger metadata through it instead of ZooKeeper (docs/formats/bookkeeper.md §1.5)."""

    url: HttpUrl


LAB_SCHEMA = {
    "type": "object",
    "description": "the simulated cluster, read by its parser (lab/bookkeeper/config.py, "
                   "docs/bookkeeper/lab.md)",
    "properties": {**{k: {"type": "integer", "minimum": 0} for k in LAB_INT_KEYS},
                   "faults": {"type": "array", "items": {"type": "object", "required": ["kind"],
                                                         "properties": {"kind": {"type": "string",
                                                                                 "pattern": FAULT_KIND_RE.pattern}}}}},
}
# read by the lab's own parser when the estate is read (System.lab_config)
BookKeeperLab = lab_block(schema=LAB_SCHEMA)
BookieAddresses = string_map(text(HOST_PORT_RE, "an address host:port"), "a mapping")
Racks = string_map(text(RACK_RE, "a rack path like /region/rack"), "a mapping")
Source = choice(*SOURCES)
AtLeastOne = integer(1)
Percent = Annotated[int, Strict(), Ge(0), Le(100), expect("an integer from 0 to 100")]
LedgerDirs = listing(text(LEDGER_DIR_RE, "an absolute directory path"), "ledger directory paths", unique=True)
LocationIndex = string_map(LedgerDirs, "a mapping bookieId -> [ledger directory paths]")


def _seconds(value):
    # "2s" / "1m" as elsewhere in the estate, or a number of seconds (fractions allowed: tests use 0.2).
    if isinstance(value, str):
        try:
            return float(parse_duration(value))
        except ValueError:
            raise rule_error("a duration like 2s or a positive number of seconds", show(value)) from None
    return value


ShortWait = Annotated[float, BeforeValidator(_seconds), Strict(), Gt(0),
                      expect("a duration like 2s or a positive number of seconds"),
                      WithJsonSchema({"anyOf": [{"type": "number", "exclusiveMinimum": 0}, DURATION_SCHEMA]})]


@record
class BookKeeperCluster(Record):
    """One BookKeeper cluster. `lab` is a plain dict for the simulator (only for source "lab")."""

    system: ClassVar[str] = "bookkeeper"

    name: Name
    source: Source
    zookeeper: ZooKeeperConfig | None = None
    admin_http: AdminHttpConfig | None = None
    bookie_addresses: BookieAddresses = Field(default_factory=dict)  # bookieId -> host:port
    racks: Racks = Field(default_factory=dict)  # bookieId -> /region/rack
    timeouts: Timeouts = Field(default_factory=Timeouts)
    bookie_window: AtLeastOne = DEFAULT_BOOKIE_WINDOW  # requests in flight per bookie
    # DbLedgerStorage bookies never answer the entry list (docs/formats/bookkeeper.md §1.7): after this wait a read
    # tells a live one, whose entries are then read-probed (audit/systems/bookkeeper/collect/read_probe.py).
    list_probe_timeout_s: ShortWait = Field(DEFAULT_LIST_PROBE_TIMEOUT_S, alias="list_probe_timeout")
    read_probe_percent: Percent = 0  # the Auditor's auditorLedgerVerificationPercentage (default 0)
    read_probe_window: AtLeastOne = DEFAULT_BOOKIE_WINDOW  # reads in flight per probed bookie
    location_index: LocationIndex = Field(default_factory=dict)  # bookieId -> ledger dirs read on this host
    lab: BookKeeperLab | None = None

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> "BookKeeperCluster":
        if self.source == "zookeeper" and self.zookeeper is None:
            raise rule_error("a zookeeper block (required for source: zookeeper)", "nothing", at=("zookeeper",))
        if self.source == "admin_http" and self.admin_http is None:
            raise rule_error("an admin_http block (required for source: admin_http)", "nothing", at=("admin_http",))
        # The lab can load its simulated cluster into a ZooKeeper (lab/bookkeeper/runner.py); an estate
        # file does not offer that.
        if self.source == "lab" and self.zookeeper is not None and file_context(info) is not None:
            raise rule_error("no zookeeper block with source: lab", "a zookeeper block", at=("zookeeper",))
        if self.source != "lab" and self.lab is not None:
            raise rule_error("a lab block only with source: lab", f"source {self.source!r}", at=("lab",))
        if self.source == "lab" and self.lab is None:
            set_field(self, "lab", {})
        for bookie, dirs in self.location_index.items():
            if not dirs:
                raise rule_error("at least one ledger directory", "an empty list", at=("location_index", bookie))
        return self


@record
class BookKeeperThresholds(Record):
    """BookKeeper's keys of the estate's `thresholds:` block."""

    open_ledger_max_age_s: Duration = Field(6 * 3600, alias="open_ledger_max_age")
    min_racks_per_write_quorum: AtLeastOne = 2
    # A DbLedgerStorage bookie's location index lacks what its write cache has not flushed yet (every
    # flushInterval, 10 s as shipped): a ledger written within this long before the index read is not judged
    # from that index (audit/systems/bookkeeper/domain/evidence.py settled_in_index)
    location_index_settle_s: Duration = Field(60, alias="location_index_settle")


__all__ = ["AdminHttpConfig", "BookKeeperCluster", "BookKeeperThresholds", "ZooKeeperConfig", "Timeouts",
           "SOURCES"]
