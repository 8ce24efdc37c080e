"""Approved BookKeeper repairs: per planned ledger (audit/systems/bookkeeper/repair/plan.py), mark it under-replicated
in ZooKeeper exactly as BookKeeper's ZkLedgerUnderreplicationManager.markLedgerUnderreplicatedAsync does, so that
AutoRecovery (its ReplicationWorkers) re-replicates it and its placement policy picks the real targets
(docs/formats/bookkeeper.md §1.11).

- check(): reads ZooKeeper live: the ledger's metadata znode, decoded by the formats module, must still be what the
  plan was computed from (the plan's `preconditions`), the AutoRecovery layout must be BookKeeper's, and ledger
  replication must be enabled: while `<root>/underreplication/disable` exists AutoRecovery does not act, and a
  marker would only hide the finding.
- run(): creates `<root>/underreplication/ledgers/<hex path>/urL<id>` (parents persistent and empty), or adds the
  missing replicas to an existing one with a versioned setData; the ACL is the one BookKeeper gave
  `<root>/underreplication/ledgers` (its zkAcls), so AutoRecovery can read and delete the marker.
- verify(): the marker exists and lists every missing replica.

Each call opens its own ZooKeeper session and closes it: the runner may stop after any check, and nothing may be
left running. Entries with no replica left (the plan's escalations) get no action: there is nothing to copy."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

from audit.systems.bookkeeper.collect.zk_metadata import connect, normalize_root
from audit.contracts import Precheck, RepairAction
from audit.systems.bookkeeper.formats.ledger_metadata import decode_znode, ledger_id_from_znode_path
from audit.systems.bookkeeper.formats.proto.DataFormats_pb2 import UnderreplicatedLedgerFormat
from audit.errors import PayloadError
from audit.repair.common import RepairInputError
from audit.timeutil import now_ms

ACTION = "mark_underreplicated"
UNDER_REPLICATION = "underreplication"      # BookKeeperConstants.UNDER_REPLICATION_NODE
DISABLE = "disable"                         # BookKeeperConstants.DISABLE_NODE
LAYOUT = "LAYOUT"                           # BookKeeperConstants.LAYOUT_ZNODE
LAYOUT_TYPE, LAYOUT_VERSION = "BASIC", 1    # ZkLedgerUnderreplicationManager.LAYOUT / LAYOUT_VERSION
INT32_MAX = 2**31 - 1
_MAX_TRIES = 10     # create/merge rounds lost to concurrent writers before giving up (BookKeeper retries forever)


# -------------------------------------------------------------------------------------------------- paths
def under_replication_base(root: str) -> str:
    return f"{root}/{UNDER_REPLICATION}"


def marked_ledgers_path(root: str) -> str:
    """`<root>/underreplication/ledgers`: urLedgerPath (basePath + DEFAULT_ZK_LEDGERS_ROOT_PATH, always /ledgers)."""
    return f"{under_replication_base(root)}/ledgers"


def marker_path(root: str, ledger_id: int) -> str:
    """getUrLedgerZnode: the id's four 16-bit groups (bits 63-48 ... 15-0) as %04x, then urL + %010d."""
    groups = "/".join(f"{ledger_id >> shift & 0xFFFF:04x}" for shift in (48, 32, 16, 0))
    return f"{marked_ledgers_path(root)}/{groups}/urL{ledger_id:010d}"


def metadata_paths(root: str, ledger_id: int) -> list[str]:
    """Where the ledger's metadata znode can be: flat L%010d, 2-4-4 of %010d (legacy and hybrid below
    Integer.MAX_VALUE) and 3-4-4-4-4 of %019d (long and hybrid from it on) -- the layouts the collector walks.
    Each candidate must give the ledger id back through the collector's own path parser."""
    s10, s19 = f"{ledger_id:010d}", f"{ledger_id:019d}"
    rels = [f"L{s10}", f"{s10[:2]}/{s10[2:6]}/L{s10[6:]}",
            f"{s19[:3]}/{s19[3:7]}/{s19[7:11]}/{s19[11:15]}/L{s19[15:]}"]
    return [f"{root}/{rel}" for rel in rels if ledger_id_from_znode_path(rel) == ledger_id]


# -------------------------------------------------------------------------------------------------- content
def marker_text(replicas: list[str], ctime_ms: int) -> bytes:
    """UnderreplicatedLedgerFormat in protobuf text form, as toTextFormat() writes it: `replica: "<id>"` lines,
    then `ctime: <ms>` (storeSystemTimeAsLedgerUnderreplicatedMarkTime defaults to true)."""
    from google.protobuf import text_format

    return text_format.MessageToString(UnderreplicatedLedgerFormat(replica=replicas, ctime=ctime_ms)).encode()


def _replica_lines(replicas: list[str]) -> str:
    from google.protobuf import text_format

    return text_format.MessageToString(UnderreplicatedLedgerFormat(replica=replicas))


def parse_marker(data: bytes, source: str) -> UnderreplicatedLedgerFormat:
    from google.protobuf import text_format

    fmt = UnderreplicatedLedgerFormat()
    try:
        text_format.Parse((data or b"").decode("utf-8"), fmt)
    except (UnicodeDecodeError, text_format.ParseError) as e:
        raise PayloadError(source, "UnderreplicatedLedgerFormat", "protobuf text format", str(e)) from None
    return fmt


# -------------------------------------------------------------------------------------------------- plan input
def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _zookeeper(cluster: Any):
    name = getattr(cluster, "name", "?")
    if getattr(cluster, "source", None) == "lab":
        raise RepairInputError(f"cluster {name}", "source",
                               "a real cluster (zookeeper): a lab cluster has nothing to repair")
    zk = getattr(cluster, "zookeeper", None)
    if zk is None:
        raise RepairInputError(f"cluster {name}", "zookeeper",
                               "a zookeeper block: the under-replication marker is written to ZooKeeper")
    return zk


def _precondition(src: str, p: Any) -> dict[str, Any]:
    """The metadata snapshot the plan was computed from, checked field by field."""
    if not isinstance(p, Mapping):
        raise RepairInputError(src, "<entry>", "an object")
    for key in ("last_entry_id", "ensemble_size", "write_quorum", "ack_quorum"):
        if not _int(p.get(key)):
            raise RepairInputError(src, key, "an integer")
    if not isinstance(p.get("state"), str):
        raise RepairInputError(src, "state", "a ledger state (OPEN, IN_RECOVERY, CLOSED)")
    if p.get("ctoken") is not None and not _int(p.get("ctoken")):
        raise RepairInputError(src, "ctoken", "an integer or null")
    segments = p.get("segments")
    if not isinstance(segments, list) or not segments:
        raise RepairInputError(src, "segments", "a non-empty list of {first_entry_id, ensemble}")
    for seg in segments:
        if (not isinstance(seg, Mapping) or not _int(seg.get("first_entry_id"))
                or not isinstance(seg.get("ensemble"), list)
                or not all(isinstance(b, str) and b for b in seg["ensemble"])):
            raise RepairInputError(src, "segments", "{first_entry_id: integer, ensemble: [bookie ids]}")
    return _snapshot(p["state"], p["last_entry_id"], p.get("ctoken"), p["ensemble_size"], p["write_quorum"],
                     p["ack_quorum"], [(s["first_entry_id"], s["ensemble"]) for s in segments])


def _snapshot(state, last_entry_id, ctoken, ensemble_size, write_quorum, ack_quorum, segments) -> dict[str, Any]:
    # An absent cToken (metadata format v1/v2) reads as 0 in BookKeeper (LedgerMetadataBuilder's BLANK_CTOKEN),
    # and the admin JSON reports it as 0: compare it that way.
    return {"state": state, "last_entry_id": last_entry_id, "ctoken": 0 if ctoken is None else ctoken,
            "ensemble_size": ensemble_size, "write_quorum": write_quorum, "ack_quorum": ack_quorum,
            "segments": [{"first_entry_id": first, "ensemble": list(ens)} for first, ens in segments]}


def _planned(plan: Mapping[str, Any]) -> list[tuple[int, list[str], dict[str, Any], str | None]]:
    """(ledger id, missing replicas, precondition snapshot, note) per entry of the plan's `ledgers`."""
    ledgers = _plan_list(plan, "ledgers", "a list of planned ledgers")
    pre_list = _plan_list(plan, "preconditions", "a list with one entry per planned ledger")
    pre = {p.get("ledger_id"): (i, p) for i, p in enumerate(pre_list) if isinstance(p, Mapping)}
    lost = {e.get("ledger_id"): e.get("entry_count") for e in plan.get("escalations") or []
            if isinstance(e, Mapping)}
    out, seen = [], set()
    for i, led in enumerate(ledgers):
        src = f"ledgers[{i}]"
        lid = _planned_ledger_id(src, led, seen)
        replicas = _missing_replicas(src, led)
        if lid not in pre:
            raise RepairInputError("plan.preconditions", "ledger_id", f"an entry for ledger {lid}")
        j, p = pre[lid]
        note = _lost_entries_note(lost.get(lid))
        out.append((lid, sorted(replicas), _precondition(f"preconditions[{j}]", p), note))
    if not out:
        raise RepairInputError("plan", "ledgers", "at least one ledger to re-replicate (escalations are manual "
                                                  "steps: nothing is left to copy)")
    return out


def _plan_list(plan: Mapping[str, Any], key: str, expected: str) -> list:
    found = plan.get(key)
    if not isinstance(found, list):
        raise RepairInputError("plan", key, expected)
    return found


def _planned_ledger_id(src: str, led: Any, seen: set[int]) -> int:
    """The entry's ledger id: a non-negative integer, each ledger planned once (`seen` collects them)."""
    lid = led.get("ledger_id") if isinstance(led, Mapping) else None
    if not _int(lid) or lid < 0:
        raise RepairInputError(src, "ledger_id", "a non-negative integer ledger id")
    if lid in seen:
        raise RepairInputError(src, "ledger_id", f"each ledger once (ledger {lid} is planned twice)")
    seen.add(lid)
    return lid


def _missing_replicas(src: str, led: Mapping[str, Any]) -> list[str]:
    """The bookies of the entry's missing fragments, each once, in the order first named."""
    fragments = led.get("fragments")
    if not isinstance(fragments, list) or not fragments:
        raise RepairInputError(src, "fragments", "a non-empty list of missing fragments")
    replicas: list[str] = []
    for j, frag in enumerate(fragments):
        bookie = frag.get("bookie") if isinstance(frag, Mapping) else None
        if not isinstance(bookie, str) or not bookie:
            raise RepairInputError(f"{src}.fragments[{j}]", "bookie", "a bookie id")
        if bookie not in replicas:
            replicas.append(bookie)
    return replicas


def _lost_entries_note(lost_entries: Any) -> str | None:
    """The plan's escalation count of entries with no replica left, as a note (None when there are none)."""
    if not lost_entries:
        return None
    return (f"{lost_entries} entries of this ledger have no replica left (see escalations): "
            f"re-replication restores only the others")


# -------------------------------------------------------------------------------------------------- ZooKeeper
@contextmanager
def _session(zk_cfg: Any, secrets: Any, timeouts: Any) -> Iterator[Any]:
    """A read-write session on the cluster's ZooKeeper (the collector's connect), always stopped and closed."""
    auth = [("digest", secrets.resolve(zk_cfg.digest_auth))] if zk_cfg.digest_auth is not None else None
    client = connect(zk_cfg.hosts, float(timeouts.request_s), auth, read_only=False)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _get(zk: Any, path: str) -> tuple[bytes, Any] | None:
    from kazoo.exceptions import NoNodeError

    try:
        data, stat = zk.get(path)
    except NoNodeError:
        return None
    return data or b"", stat


def _layout(zk: Any, root: str) -> str:
    """"BASIC:1" when `<root>/underreplication` has BookKeeper's layout (checkLayout creates LAYOUT and ledgers
    when AutoRecovery or the shell first opens it), else what is wrong."""
    got = _get(zk, f"{under_replication_base(root)}/{LAYOUT}")
    if got is None:
        return f"missing {under_replication_base(root)}/{LAYOUT}: AutoRecovery never ran against this root"
    text = got[0].decode("utf-8", "replace")
    fields = dict(tuple(part.strip().strip('"') for part in line.split(":", 1))
                  for line in text.splitlines() if ":" in line)
    found = f"{fields.get('type')}:{fields.get('version')}"
    if found != f"{LAYOUT_TYPE}:{LAYOUT_VERSION}":
        return f"incompatible layout {text.strip()!r}"
    if zk.exists(marked_ledgers_path(root)) is None:
        return f"missing {marked_ledgers_path(root)}"
    return found


def _observe(zk: Any, root: str, ledger_id: int, source_prefix: str) -> dict[str, Any]:
    found = [(path, got) for path in metadata_paths(root, ledger_id) if (got := _get(zk, path)) is not None]
    observed: dict[str, Any] = {"replication_enabled": zk.exists(f"{under_replication_base(root)}/{DISABLE}") is None,
                                "autorecovery_layout": _layout(zk, root)}
    if len(found) != 1:
        observed["metadata"] = ("no metadata znode: the ledger was deleted" if not found else
                                f"several metadata znodes: {[p for p, _ in found]}")
        return observed
    path, (data, _) = found[0]
    md = decode_znode(data, source_prefix + path, ledger_id)
    observed["metadata_znode"] = path
    observed["metadata"] = _snapshot(md.state, md.last_entry_id, md.ctoken, md.ensemble_size, md.write_quorum_size,
                                     md.ack_quorum_size, [(s.first_entry_id, s.ensemble) for s in md.segments])
    marker = _get(zk, marker_path(root, ledger_id))
    observed["marked_replicas"] = (None if marker is None
                                   else list(parse_marker(marker[0], marker_path(root, ledger_id)).replica))
    return observed


def _create_full_path(zk: Any, path: str, data: bytes, acl: list) -> list[str]:
    """ZkUtils.asyncCreateFullPathOptimistic: create; on NoNode create the parent (persistent, empty, same ACL;
    NodeExists is fine) and retry. -> the paths created, parents first."""
    from kazoo.exceptions import NodeExistsError, NoNodeError

    try:
        zk.create(path, data, acl=acl)
        return [path]
    except NoNodeError:
        pass
    try:
        created = _create_full_path(zk, path.rsplit("/", 1)[0], b"", acl)
    except NodeExistsError:
        created = []
    zk.create(path, data, acl=acl)
    return created + [path]


def _mark(zk: Any, path: str, replicas: list[str], acl: list, now_ms: Callable[[], int]) -> dict[str, Any]:
    """tryMarkLedgerUnderreplicatedAsync + handleLedgerUnderreplicatedAlreadyMarked: create the marker; when it
    exists, add the replicas it lacks and set ctime with setData at the version read (BadVersion: read again,
    NoNode: create again); when it lacks none, write nothing."""
    from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

    step = "create"
    for _ in range(_MAX_TRIES):
        if step == "create":
            ctime = now_ms()
            try:
                created = _create_full_path(zk, path, marker_text(replicas, ctime), acl)
            except NodeExistsError:
                step = "merge"
                continue
            return {"path": path, "created": created, "replicas_added": list(replicas), "replicas": list(replicas),
                    "ctime": ctime, "version": 0}
        got = _get(zk, path)
        if got is None:
            step = "create"
            continue
        data, stat = got
        fmt = parse_marker(data, path)
        added = []
        for r in replicas:
            if r not in fmt.replica:
                fmt.replica.append(r)
                added.append(r)
        if not added:
            return {"path": path, "created": [], "replicas_added": [], "replicas": list(fmt.replica),
                    "ctime": fmt.ctime if fmt.HasField("ctime") else None, "version": stat.version}
        fmt.ctime = now_ms()
        from google.protobuf import text_format

        try:
            new = zk.set(path, text_format.MessageToString(fmt).encode(), version=stat.version)
        except NoNodeError:
            step = "create"
            continue
        except BadVersionError:
            continue
        return {"path": path, "created": [], "replicas_added": added, "replicas": list(fmt.replica),
                "ctime": fmt.ctime, "version": new.version}
    raise RuntimeError(f"{path}: still changing after {_MAX_TRIES} create/merge attempts; nothing more written")


def _acl_json(acl: list) -> list[dict[str, Any]]:
    # Digest ids carry a password hash: show the scheme and the user only.
    return [{"scheme": a.id.scheme, "id": a.id.id.split(":", 1)[0] if a.id.scheme == "digest" else a.id.id,
             "perms": a.perms} for a in acl]


# -------------------------------------------------------------------------------------------------- actions
def actions(plan: Mapping, cluster: Any, secrets: Any) -> list[RepairAction]:
    """One `mark_underreplicated` per planned ledger, in the plan's order. RepairInputError for a lab cluster, a
    cluster without ZooKeeper, a plan of another system or cluster, a plan with nothing to apply or a bad field."""
    zk_cfg = _zookeeper(cluster)
    if not isinstance(plan, Mapping) or plan.get("system") != "bookkeeper":
        raise RepairInputError("plan", "system", "bookkeeper")
    if plan.get("cluster") != cluster.name:
        raise RepairInputError("plan", "cluster", f"{cluster.name!r}, the cluster it is applied to")
    try:
        root = normalize_root(zk_cfg.ledgers_root)
    except ValueError:
        raise RepairInputError(f"cluster {cluster.name}", "zookeeper.ledgers_root", "an absolute znode path") from None
    timeouts = cluster.timeouts
    return [_action(zk_cfg, secrets, timeouts, root, lid, replicas, expected, note)
            for lid, replicas, expected, note in _planned(plan)]


def _action(zk_cfg: Any, secrets: Any, timeouts: Any, root: str, ledger_id: int, replicas: list[str],
            metadata: dict[str, Any], note: str | None) -> RepairAction:
    path = marker_path(root, ledger_id)
    source_prefix = f"zookeeper://{zk_cfg.hosts}"
    expected = {"replication_enabled": True, "autorecovery_layout": f"{LAYOUT_TYPE}:{LAYOUT_VERSION}",
                "metadata": metadata}

    def check() -> Precheck:
        with _session(zk_cfg, secrets, timeouts) as zk:
            observed = _observe(zk, root, ledger_id, source_prefix)
        holds = all(observed.get(k) == v for k, v in expected.items())
        if not observed["replication_enabled"]:
            observed["why"] = (f"ledger replication is disabled ({under_replication_base(root)}/{DISABLE} exists): "
                               "AutoRecovery would not act on the marker; apply once it is enabled again "
                               "(bin/bookkeeper shell autorecovery -e)")
        return Precheck(holds, observed, expected)

    def run() -> Mapping[str, Any]:
        from kazoo.exceptions import NoNodeError

        with _session(zk_cfg, secrets, timeouts) as zk:
            try:
                acl, _ = zk.get_acls(marked_ledgers_path(root))
            except NoNodeError:
                raise RuntimeError(f"{marked_ledgers_path(root)} is missing: AutoRecovery's layout is not there, "
                                   f"nothing written") from None
            result = _mark(zk, path, replicas, list(acl), now_ms)
        return {**result, "acl": _acl_json(acl)}

    def verify() -> Precheck:
        with _session(zk_cfg, secrets, timeouts) as zk:
            got = _get(zk, path)
        listed = None if got is None else list(parse_marker(got[0], path).replica)
        return Precheck(listed is not None and all(r in listed for r in replicas),
                        {"path": path, "replicas": listed}, {"path": path, "replicas_include": replicas})

    request = {
        "zookeeper": zk_cfg.hosts,
        "path": path,
        "content": _replica_lines(replicas) + "ctime: <epoch ms of the call>\n",
        "parents": "created when missing: persistent, empty, same ACL",
        "acl": f"the ACL of {marked_ledgers_path(root)} (what BookKeeper gave its under-replication znodes)",
        "if_exists": "add the replicas it does not list and set ctime (setData at the version read); "
                     "no write when it lists them all",
        "missing_replicas": replicas,
    }
    if note:
        request["note"] = note
    return RepairAction(name=ACTION, target=f"ledger {ledger_id}", request=request, check=check, run=run,
                        verify=verify)


__all__ = ["ACTION", "actions", "marker_path", "marker_text", "metadata_paths", "parse_marker"]
