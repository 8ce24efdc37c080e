"""One ordered pair of clusters (X replicates the topic to Y) -> a failover row per subscription on both, the
pair's facts for the checks, and what the pair could not judge (docs/pulsar/audit.md).

X's and Y's windows were read at their own collection instants, their cursors again by the rereads: the target
read and the source reads around it are chosen by reads.bracket, and everything compared is what both windows
speak for (failover._placed)."""
from __future__ import annotations

from typing import Callable


from audit.systems.pulsar.domain import checks, pip33
from audit.systems.pulsar.domain.failover import Bounds, compare, failover
from audit.systems.pulsar.domain.identity import Match
from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.domain.reads import PRIMARY, Bracket, CursorRead, bracket
from audit.systems.pulsar.domain.sides import REPLICATOR, ClusterSide, Cursor, Settings, read_after

AMBIGUOUS = "pairing_ambiguous"
UNBRACKETED, UNTIMED = "reads_not_bracketing", "read_instants_unknown"


def _coverage(settings: Settings, topic: str, x: ClusterSide, y: ClusterSide, what: str, count: int | None,
              detail: str) -> dict:
    return {"run_id": settings.run_id, "cluster": x.cluster, "topic": topic, "subscription": None,
            "target_cluster": y.cluster, "what": what, "entry_count": count, "detail": detail}


def ambiguity(settings: Settings, topic: str, x: ClusterSide, y: ClusterSide, m: Match) -> list[dict]:
    """A coverage row when some messages could only be paired by a repeating (origin, producer, sequence id)."""
    if not m.ambiguous:
        return []
    return [_coverage(settings, topic, x, y, AMBIGUOUS, m.ambiguous,
                      f"{m.ambiguous} messages of {x.cluster} and {y.cluster} carry no source position and their "
                      "(origin, producer, sequence id) repeats in the window (a producer without deduplication "
                      "restarted): not compared, and no repair is planned from this pair")]


def _bracket_coverage(settings: Settings, topic: str, x: ClusterSide, y: ClusterSide, b: Bracket,
                      affected: int) -> list[dict]:
    """What the reads could not settle, when it touches any message (`affected`: of the replicated
    subscriptions, the messages whose verdict depends on the missing read)."""
    if not affected or (b.complete and not b.untimed):
        return []
    if b.untimed:
        return [_coverage(settings, topic, x, y, UNTIMED, affected,
                          f"no read of {x.cluster} or {y.cluster} says when it happened (a hand-taken dump without "
                          f".read.json): {affected} skipped or lagging messages are judged as if both clusters "
                          "were read at one instant; one acked on either side between the two reads would count "
                          "the same")]
    missing = "after" if b.after is None else "before"
    effect = (f"{affected} messages acked on the target and not on the source are not judged as skipped (the "
              "source may have acked them after its read)" if b.after is None else
              f"{affected} lagging redeliveries count what the source had acked by its later read (an upper "
              "bound)")
    return [_coverage(settings, topic, x, y, UNBRACKETED, affected,
                      f"no read of {x.cluster}'s cursors {missing} the read of {y.cluster}'s: {effect}; reread both "
                      "clusters after collecting them (the reread stage) to judge every message")]


def _cursor(read: CursorRead | None, name: str, fallback: tuple[Cursor, int]) -> tuple[Cursor, int]:
    """The subscription's cursor in `read` and the read's number (the key of its acked mask), else `fallback`."""
    c = read.cursors.get(name) if read is not None else None
    return (c, read.number) if c is not None else fallback


def _delivered(read: CursorRead | None, remote: str) -> Callable[[Position], bool] | None:
    """Whether X's replicator to `remote` had acked (sent) a position by `read`: an UPDATE X wrote reached Y only
    then. None: no such read, nothing X wrote counts as delivered."""
    if read is None:
        return None
    for c in read.cursors.values():
        if c.kind == "replicator" and c.remote_cluster == remote:
            return c.acks.contains
    return None


def _processed(read: CursorRead | None, side: ClusterSide, remote: str) -> Callable[[Position], bool]:
    """Whether side's replicator to `remote` had read (and so acked) a position by `read` (else by side's
    collection read, no later): only then had side's broker handed a marker copied from `remote` to its
    replicated-subscriptions controller (PersistentReplicator.checkReplicatedSubscriptionMarker, docs/formats/pulsar.md
    §2.6 step 5). No such replicator: nothing was."""
    found = [c for c in (read.cursors.values() if read is not None else ())
             if c.kind == REPLICATOR and c.remote_cluster == remote]
    c = found[0] if found else side.replicator(remote)
    return c.acks.contains if c is not None else (lambda p: False)


def _ms(read: CursorRead | None, answered: bool = True) -> int | None:
    if read is None:
        return None
    return read.answered_ms if answered else read.requested_ms


def pair_rows(topic: str, x: ClusterSide, y: ClusterSide, m: Match, acked, sent, settings: Settings,
              facts: list, coverage: list) -> list[dict]:
    rows = []
    y_subs = y.subscriptions()
    # a side whose dump was not read at all (every entry unread or not judged) vouches for nothing
    comparison = compare(x.window, y.window, m, source_sent=sent(x, y.cluster), target_sent=sent(y, x.cluster),
                         source_vouches=x.complete or len(x.window) > 0,
                         target_vouches=y.complete or len(y.window) > 0,
                         source_bounds=Bounds(x.dump_from, x.dump_to, read_after(x, y)),
                         target_bounds=Bounds(y.dump_from, y.dump_to, read_after(y, x)))
    b = bracket(x.all_reads(), y.all_reads())
    affected = 0
    before = b.before if b is not None and b.before is not None else (b.after if b is not None else None)
    after_known = b is None or b.untimed or b.after is not None
    for sub, cx in sorted(x.subscriptions().items()):
        cy_primary = y_subs.get(sub)
        if cy_primary is None:
            continue
        cy, y_read = _cursor(b.target if b else None, sub, (cy_primary, PRIMARY))
        cx_before, n_before = _cursor(before, sub, (cx, PRIMARY))
        cx_after, n_after = _cursor(b.after if b else None, sub, (cx_before, n_before))
        replicated = x.is_replicated(sub)
        exp = pip33.Expectation(None, None, None)
        cache, cache_note = settings.cache_model(x.cluster)
        if replicated:
            index = x.window.index
            exp = pip33.expect_target(x.window.markers, sub, x.cluster, y.cluster, cx.acks.mark_delete,
                                      cx.acks.read_position, cache=cache, target_markers=y.window.markers,
                                      distance=lambda a, c: max(0, index.count_below(c)
                                                                - index.count_at_or_below(a)),
                                      delivered=_delivered(before, y.cluster) if b and not b.untimed else None,
                                      processed=_processed(b.target if b else None, y, x.cluster))
        fo = failover(comparison, cx_before.acks, cy.acks, target_end=y.dump_to, target_from=y.dump_from,
                      source_acked=acked(x, cx_before, n_before), target_acked=acked(y, cy, y_read),
                      fallback=exp.expected, max_acknowledge=settings.max_acknowledge,
                      reach=exp.reach,   # what Y's broker applied; a cached snapshot told Y nothing
                      source_after=cx_after.acks, source_after_acked=acked(x, cx_after, n_after),
                      after_known=after_known)
        ahead = pip33.messages_ahead(y.window, cy_primary.acks.mark_delete, exp.justified) if replicated else 0
        complete = (x.complete and y.complete and _covers(x, cx) and _covers(y, cy) and fo.exact_known
                    and not m.ambiguous and b is not None and (b.complete or b.untimed))
        row = {
            "run_id": settings.run_id, "topic": topic, "subscription": sub, "source_cluster": x.cluster,
            "target_cluster": y.cluster, "replicated": replicated, "source_mdp": str(cx_before.acks.mark_delete),
            "target_mdp": str(cy.acks.mark_delete), "expected_target_mdp": _pos(exp.expected),
            "exact_target_mdp": str(fo.exact_target_mdp), "window_from": _pos(x.dump_from),
            "window_to": _pos(x.dump_to), "compared": fo.compared, "only_on_source": fo.only_on_source,
            "only_on_target": fo.only_on_target, "redelivered": fo.redelivered, "skipped": fo.skipped,
            "lost": fo.lost, "redelivered_ranges": y.window.ranges_json(fo.redelivered_runs),
            "skipped_ranges": y.window.ranges_json(fo.skipped_runs),
            "to_acknowledge": y.window.positions_json(fo.to_acknowledge_rows),
            "to_acknowledge_count": fo.to_acknowledge_count, "complete": complete,
            AMBIGUOUS: bool(m.ambiguous), "ambiguous": m.ambiguous, "redelivery_lag": fo.lag,
            "unsettled": fo.unsettled, "after_source_window": fo.after_source_window,
            "target_read_at_ms": _ms(b.target if b else None),
            "source_read_before_ms": None if b is None or b.untimed else _ms(b.before),
            "source_read_after_ms": None if b is None or b.untimed else _ms(b.after, answered=False)}
        rows.append(row)
        evidence = {k: row[k] for k in ("source_mdp", "target_mdp", "expected_target_mdp", "exact_target_mdp",
                                        "complete", "unsettled", "target_read_at_ms", "source_read_before_ms",
                                        "source_read_after_ms")}
        evidence.update(snapshot_cache=f"{cache.kind}/{cache.size}", snapshot_cache_note=cache_note)
        evidence.update(expected_basis=exp.basis, justified_target_mdp=_pos(exp.justified),
                        applied_target_mdp=_pos(exp.reach),
                        target_moves_backward=fo.target_moves_backward, exact_known=fo.exact_known)
        now = y.now_ms(settings.as_of_ms)
        now = now if now is not None else y.window.newest_publish_ms
        age = None if fo.lag_oldest_ms is None or now is None else now - fo.lag_oldest_ms
        pair = checks.PairFacts(topic, sub, x.cluster, y.cluster, replicated, fo.redelivered, fo.skipped,
                                fo.lost, ahead, evidence, fo.lag, age)
        # the redeliveries pulsar.failover_redelivery reports (GX checks this column, not `redelivered`)
        row["redelivery_beyond_tolerance"] = fo.lag if replicated and checks.redelivery_beyond_tolerance(
            pair, settings.thresholds.tolerance(topic)) else 0
        facts.append(pair)
        if replicated and b is not None:
            # what a finding could rest on: skips, and redeliveries an UPDATE had told the target about (the lag)
            affected += (fo.unsettled if b.after is None else fo.lag if b.before is None else fo.lag + fo.skipped)
    if b is not None:
        coverage += _bracket_coverage(settings, topic, x, y, b, affected)
    return rows


def _pos(p: Position | None) -> str | None:
    return None if p is None else str(p)


def _covers(side: ClusterSide, cursor: Cursor) -> bool:
    return side.dump_from is not None and cursor.acks.mark_delete >= side.dump_from
