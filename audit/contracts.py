"""The shared contracts: severities, a check, and the `System` record a messaging system plugs in with.

A system is a plain record of functions (no base class, no framework): the pipeline, the DAG, the CLI, `inspect`,
validate, report and bench iterate over the systems an estate declares and call these functions; nothing outside
a system's own folders names a system. The registry is `audit/systems/__init__.py`; the recipe for a new system
is docs/adding-a-system.md. Heavy imports (Spark, GX, a system's lab) happen inside the functions, so building
the record is cheap: loading the registry imports neither Spark nor any lab module (tests/test_architecture.py)."""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Sequence

SEVERITIES = ("critical", "major", "minor", "warning")  # most to least severe


class Gauge(NamedTuple):
    """One Prometheus sample: metric name (replaudit_*), help line, labels, value. The same job has the same metric
    name in every system (e.g. replaudit_failover_redelivered_messages{system, source, target})."""

    name: str
    help: str
    labels: Mapping[str, str]
    value: float


class Check(NamedTuple):
    """One kind of finding: its severity and what it means, in one line. The same table feeds the audit's
    findings, the GX suites, the report and the alerts."""

    severity: str
    meaning: str
    # entry_count is what the evidence proves, a lower bound of the true number (the lab scorecard accepts a count
    # from 1 to the true one; e.g. a MirrorMaker 2 failover: the syncs cannot tell which copies a restart made)
    at_least: bool = False


class Sniffer(NamedTuple):
    """`replaudit inspect`: `sniff(data, name)` is cheap and never raises; `decode(data, name)` returns a JSON-able
    dict or raises PayloadError for a payload that looked right but is broken."""

    kind: str
    sniff: Callable[[bytes, str], bool]
    decode: Callable[[bytes, str], dict]
    by_name: bool = False     # recognised by file name alone: tried before every content sniffer


@dataclass(frozen=True)
class ImportOption:
    """An extra flag of `replaudit import` (`--<name> VALUE`) that some kinds need."""

    name: str
    help: str


@dataclass(frozen=True)
class ImportKind:
    """`replaudit import --kind K`: a hand-taken dump of this kind. `store(put, cluster, files, options)` writes
    `files` ((path, relative name) pairs) with `put(relative key under raw/<system>/<cluster>/, bytes)` into the raw
    layout the collector itself uses, and returns {"stored": [keys], "rejected": [{"file", "reason"}]}; it raises
    ValueError naming the flag for bad options. `options` are the flags the kind reads (the others are refused)."""

    help: str
    store: Callable[..., dict]
    options: tuple[ImportOption, ...] = ()


@dataclass(frozen=True)
class Scope:
    """What an on-demand incident check asks for (docs/incident.md). `systems` / `clusters`: the estate narrowed
    before anything runs (empty: all). `subjects`: fnmatch patterns on each system's subject names (a ledger id,
    a topic, a topic-partition; empty: everything); a system's collector skips what no pattern wants.
    `window_ms`: only the last window of time where a system can tell (e.g. a dump window). `deep`: full
    dumps and segment headers, where a system makes them optional."""

    systems: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    subjects: tuple[str, ...] = ()
    window_ms: int | None = None
    deep: bool = False

    def wants(self, subject: str) -> bool:
        return not self.subjects or any(fnmatch.fnmatchcase(subject, p) for p in self.subjects)

    def wants_any(self, *names: str) -> bool:
        """A subject known by several names (e.g. a topic and its topic-partition): wanted when any is."""
        return not self.subjects or any(self.wants(n) for n in names)

    def to_json(self) -> dict:
        return {"systems": list(self.systems), "clusters": list(self.clusters), "subjects": list(self.subjects),
                "window_ms": self.window_ms, "deep": self.deep}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | None) -> "Scope":
        doc = doc or {}
        return cls(tuple(doc.get("systems") or ()), tuple(doc.get("clusters") or ()),
                   tuple(doc.get("subjects") or ()), doc.get("window_ms"), bool(doc.get("deep")))


EVERYTHING = Scope()


@dataclass(frozen=True)
class CollectRequest:
    """What a system's `collect` gets: one validated cluster of the estate, where to put its raw evidence,
    the secret resolver, the run's reference time and the estate's thresholds (for a lab's ground truth)."""

    cluster: Any
    sink: Any                 # audit.collectors.base.RawSink, rooted at raw/<system>/<cluster>/
    secrets: Any              # audit.config.secrets.SecretResolver
    as_of_ms: int
    thresholds: Any           # the estate's thresholds (every system's fields)
    scope: Scope = EVERYTHING


@dataclass(frozen=True)
class RereadRequest:
    """What a system's `reread` gets once every cluster of the system is collected: its clusters (validated models,
    in estate order) and, per cluster name, a sink rooted at raw/<system>/<cluster>/ (new keys only: what the
    collection stored is never replaced) and the keys its collection stored (relative to that folder)."""

    clusters: tuple
    sink_for: Callable[[str], Any]
    collected: Callable[[str], list]
    secrets: Any
    as_of_ms: int
    thresholds: Any


@dataclass(frozen=True)
class AuditRequest:
    """What a system's `audit` job gets besides Spark and the folders."""

    run_id: str
    as_of_ms: int | None
    thresholds: Any
    clusters: tuple = ()   # the estate's clusters of this system (its validated models): what the estate declares
    scope: Scope = EVERYTHING


@dataclass(frozen=True)
class RunOutputs:
    """A staged run as the report sees it: `root` is the attempt folder (tables/, findings/, metrics/, raw/)."""

    root: Path
    violations: list[dict]
    estate: Any


@dataclass(frozen=True)
class ReportSection:
    """A system's part of the summary, the HTML report and the terminal text, and of the lab scorecard.

    summary(outputs) -> dict | None            keys merged into the run summary's top level (unique across
                                               systems); None or {}: nothing of this system in the run
    html(summary, violations) -> str           an HTML fragment (values escaped by the section)
    text(summary) -> list[str]                 terminal lines (`summary`: the whole run summary)
    truth_key(finding) -> tuple                key of a ground-truth finding
    claims(violation) -> [(key, count)]        keys one violation can answer
    truth_item(finding) -> dict                where a ground-truth finding is (for the scorecard's lists)
    scorecard(truths, outputs) -> dict | None  an extra scorecard part (e.g. failover counts), keyed by `scorecard_key`
    coverage(outputs) -> [gap]                 what the audit itself could not judge, as coverage gaps
                                               {"system", "cluster", "source", "what", "error"}: the run is then
                                               not complete (as for a source the collector could not read)
    gauges(summary) -> [Gauge]                 the system's own numbers for Prometheus (e.g. failover
                                               redeliveries per replication flow), pushed beside the shared ones
    """

    summary: Callable[[RunOutputs], dict | None]
    html: Callable[[Mapping[str, Any], list], str]
    text: Callable[[Mapping[str, Any]], list[str]]
    truth_key: Callable[[Mapping[str, Any]], tuple]
    claims: Callable[[Mapping[str, Any]], list]
    truth_item: Callable[[Mapping[str, Any]], dict]
    truth_required: tuple[str, ...] = ("check", "cluster")
    scorecard: Callable[[list, RunOutputs], dict | None] | None = None
    scorecard_key: str | None = None
    coverage: Callable[[RunOutputs], list[dict]] | None = None
    gauges: Callable[[Mapping[str, Any]], list["Gauge"]] | None = None


@dataclass(frozen=True)
class Precheck:
    """What a cluster shows now against what a repair plan requires (JSON-able values, no secrets)."""

    holds: bool
    observed: Any
    expected: Any


@dataclass(frozen=True)
class RepairAction:
    """One call of an approved repair (docs/repair.md). The runner calls `check()` right before `run()` and stops
    at the first action whose check does not hold; `run()` makes the real admin call and returns its result
    (JSON-able); `verify()`, when given, re-reads the cluster afterwards. `request` is the exact call (method,
    URL or znode path, body) as the approver sees it and the audit log keeps it: never a secret."""

    name: str                      # the domain's word: reset_cursor, mark_underreplicated, alter_group_offsets...
    target: str                    # what it acts on (a subscription, a ledger, a group's partition)
    request: Mapping[str, Any]
    check: Callable[[], Precheck]
    run: Callable[[], Mapping[str, Any]]
    verify: Callable[[], Precheck] | None = None
    # its check speaks of the state the call before it leaves (e.g. acks after a cursor reset): a dry run, which
    # makes no call, does not check it
    after_previous: bool = False


@dataclass(frozen=True)
class SystemConfig:
    """The system's part of the estate file: one entry of systems.<name>[] and the fields it adds to
    `thresholds:`."""

    cluster_model: type                       # pydantic model of one entry of systems.<name>[]
    thresholds_model: type | None = None      # pydantic model whose fields join the estate's `thresholds:`


@dataclass(frozen=True)
class Pipeline:
    """collect -> (reread) -> normalize -> audit, for the real sources (the lab's are `Lab`)."""

    collect: Callable[[CollectRequest], Any]    # -> audit.collectors.base.CollectionReport
    normalize: Callable[[Any, str, str], dict]  # (spark, the attempt's raw/ folder, tables folder) -> {table: rows}
    audit: Callable[[Any, str, str, AuditRequest], dict]  # (spark, tables folder, attempt folder, request)
    # `replaudit import --kind K`: the hand-taken dumps it takes
    import_kinds: Mapping[str, ImportKind] = field(default_factory=dict)
    # `replaudit inspect`: () -> (sniffers by file name, sniffers by content), each a (kind, sniff, decode) triple
    sniffers: Callable[[], tuple[Sequence[tuple], Sequence[tuple]]] = lambda: ((), ())
    # After every cluster is collected: read again, close together across clusters, what kept moving while they
    # were collected one after another (e.g. cursors), so the audit can tell progress between reads from a fault.
    # -> {cluster: CollectionReport}; None: the system's evidence does not move (nothing to reread)
    reread: Callable[[RereadRequest], Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class Validation:
    """The system's GX suites and the tables they read."""

    suites: Callable[[], Sequence[Any]] = lambda: ()          # -> [audit.validate.spec.SuiteSpec]
    tables: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # GX table -> (area, folder)


@dataclass(frozen=True)
class Repair:
    """Dry-run plans from a staged run, and the calls that carry out an approved one (docs/repair.md)."""

    plan: Callable[[RunOutputs], tuple[list[dict], list[dict]]]   # -> (plans, errors)
    # (a saved plan, the estate's model of its cluster, the secrets resolver) -> the plan's calls, in order; raises
    # audit.repair.common.RepairInputError for a plan with nothing to apply (manual steps only) or a bad field.
    # None: the system's plans are carried out by hand
    actions: Callable[[Mapping[str, Any], Any, Any], list[RepairAction]] | None = None


@dataclass(frozen=True)
class Incident:
    """How an incident check narrows the system to subjects (docs/incident.md)."""

    subject: str                              # what the subject patterns match, for people (e.g. "topic")
    # raw key (relative to raw/<system>/<cluster>/) -> the subject name(s) it belongs to; None: evidence of the whole
    # cluster. The shared scoped sink keeps only wanted subjects' evidence of a lab cluster.
    subjects_of_key: Callable[[str], "str | tuple[str, ...] | None"]


@dataclass(frozen=True)
class Lab:
    """The system's simulated clusters (source: lab), in the top-level `lab` package: imported only when a lab
    cluster is collected or its `lab:` block is read, never by loading the registry."""

    # CollectRequest -> (CollectionReport, ground truth dict); the sink is already narrowed to an incident's scope
    collect: Callable[[CollectRequest], tuple]
    # the parser of a cluster's `lab:` block, run when the estate is read (`estate check` refuses what the lab
    # would); raises a ValueError with `key` (or `field`), `expected` and `got`
    config: Callable[[Mapping[str, Any]], Any]
    reread: Callable[[RereadRequest], Mapping[str, Any]] | None = None
    # (ground truth, Scope, cluster) -> the ground truth of the wanted subjects only
    scope_truth: Callable[[dict, Scope, Any], dict] | None = None


@dataclass(frozen=True)
class System:
    """One messaging system, in parts: shared code calls only what a part holds. Runtime names: raw/<name>/<cluster>/,
    findings/violations/system=<name>/, tables/quarantine/system=<name>/, the `system` column of findings and the
    estate section systems.<name>."""

    name: str
    title: str
    checks: Mapping[str, Check]               # read by the audit, the suites, the report and the alerts
    config: SystemConfig
    pipeline: Pipeline
    report: ReportSection
    validation: Validation = Validation()
    repair: Repair | None = None
    lab: Lab | None = None
    incident: Incident | None = None          # None: its collector cannot narrow to subjects
    benches: tuple[str, ...] = ()             # bench modules (`make bench`)
