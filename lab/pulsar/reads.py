"""When the lab's clusters are read, and what each read saw (docs/pulsar/lab.md "Collection instants").

Each cluster is collected at its own instant, `collection_gap_s` apart in the order of `lab.clusters`, topic by
topic: its internal stats, then stats.json and the replicated-subscription statuses, then the dump of the window.
After the last collection the reread stage reads every topic's internal stats again in two passes, one topic at a
time (for topic T: every cluster holding T, then every one again, a few ms apart), as the Pulsar system's reread
does. Everything happens before as_of, while producers, replicators and consumers keep going.

A read is a clock event: the broker answers with its state at the instant the request arrives (requested_at_ms)
and the answer arrives a few ms later (answered_at_ms). The bodies are rendered then and kept in memory for
runner.collect and runner.reread to write; beside them what the ground truth needs: the entries the topic held,
the window, every cursor."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol

from lab.pulsar.model import Clock
from lab.pulsar.payloads import jackson, replicated_status, stats_internal, topic_stats
from lab.pulsar.topic import Topic

PRIMARY, PASSES = 0, (1, 2)
TOPIC_SLOT_MS = 200     # one topic's collection (the next topic's starts this much later)
REREAD_STEP_MS = 4      # between two rereads
REREAD_AFTER_MS = 1000  # from the end of the last collection to the first reread
END_MARGIN_MS = 500     # the last reread is answered this long before as_of


@dataclass(frozen=True)
class CursorState:
    mdp_idx: int
    acked: frozenset[int]
    read_idx: int

    def is_acked(self, idx: int) -> bool:
        return idx <= self.mdp_idx or idx in self.acked


@dataclass
class Read:
    """One read of a topic's internal stats on one cluster (PRIMARY: the collection's; 1, 2: the rereads)."""
    cluster: str
    topic: str
    number: int
    requested_ms: int
    answered_ms: int = 0
    body: bytes = b""
    entries: int = 0     # entries the topic held then: indices below this
    floor: int = -1      # the dump window's exclusive lower bound (an index): the window is floor+1 .. entries-1
    cursors: dict[str, CursorState] = field(default_factory=dict)

    @property
    def window(self) -> range:
        return range(self.floor + 1, self.entries)


@dataclass
class Collection:
    """A topic's collection on one cluster: `read` (internal stats: the window and its cursors), then stats.json,
    the replicated-subscription statuses and the dump, one after another."""
    read: Read
    stats: bytes = b""
    stats_at: tuple[int, int] = (0, 0)
    statuses: dict[str, tuple[bytes, int, int]] = field(default_factory=dict)   # subscription -> body, instants
    dump_at: tuple[int, int] = (0, 0)
    consumed: dict[str, bool] = field(default_factory=dict)      # subscription -> consumers served on the cluster
    replication: dict[str, tuple[bool, int]] = field(default_factory=dict)   # remote -> (connected, backlog)


class WorldView(Protocol):
    """What the plan reads of the world (builder.World, which builds the plan)."""
    config: Any
    as_of_ms: int
    clock: Clock

    @property
    def cluster_names(self) -> tuple[str, ...]: ...

    def topics_of(self, cluster: str) -> list[Topic]: ...

    def topic(self, cluster: str, name: str) -> Topic | None: ...

    def sub_rng(self, *parts: object) -> random.Random: ...


def _latency(rng: random.Random) -> int:
    return rng.randint(1, 3)


class ReadPlan:
    """Schedules every read of the world on its clock and keeps what they saw."""

    def __init__(self, world: WorldView):
        self.world = world
        cfg = world.config
        self.collections: dict[tuple[str, str], Collection] = {}
        self.rereads: dict[tuple[str, str], list[Read]] = {}
        names = {c: [t.name for t in world.topics_of(c)] for c in world.cluster_names}
        every = sorted({n for ns in names.values() for n in ns})
        n_rereads = sum(1 for t in every for c in world.cluster_names if t in names[c]) * len(PASSES)
        start = world.as_of_ms - END_MARGIN_MS - n_rereads * REREAD_STEP_MS
        spans = [max(1, len(names[c])) * TOPIC_SLOT_MS for c in world.cluster_names]
        at = start - REREAD_AFTER_MS - spans[-1]
        starts = [at]
        for span in reversed(spans[:-1]):
            at -= max(cfg.collection_gap_s * 1000, span + 100)
            starts.insert(0, at)
        self.collected_at = dict(zip(world.cluster_names, starts))
        for cluster, first in self.collected_at.items():
            for k, name in enumerate(names[cluster]):
                world.clock.at(first + k * TOPIC_SLOT_MS, self._collect, cluster, name)
        at = start
        for name in every:
            for number in PASSES:
                for cluster in world.cluster_names:
                    if name in names[cluster]:
                        world.clock.at(at, self._reread, cluster, name, number)
                        at += REREAD_STEP_MS

    def _rng(self, cluster: str, topic: str, number: int) -> random.Random:
        return self.world.sub_rng("read", cluster, topic, number)

    def _read(self, cluster: str, name: str, number: int) -> tuple[Read, Topic]:
        topic = self.world.topic(cluster, name)
        now = self.world.clock.now
        read = Read(cluster, name, number, now, now + _latency(self._rng(cluster, name, number)),
                    jackson(stats_internal(topic)), len(topic.ml.entries), topic.replicated_cursor_floor(),
                    {c.name: CursorState(c.mdp_idx, frozenset(c.acked), c.read_idx)
                     for c in topic.ml.cursors.values()})
        return read, topic

    def _collect(self, cluster: str, name: str) -> None:
        read, _ = self._read(cluster, name, PRIMARY)
        self.collections[(cluster, name)] = Collection(read)
        self.world.clock.at(read.answered_ms + 1, self._stats, cluster, name)

    def _stats(self, cluster: str, name: str) -> None:
        """stats.json, then each replicated subscription's status, then the dump (entries never change: the
        window's entries are rendered when written)."""
        c, topic = self.collections[(cluster, name)], self.world.topic(cluster, name)
        rng = self.world.sub_rng("read-stats", cluster, name)
        now = self.world.clock.now
        c.stats, c.stats_at = jackson(topic_stats(topic, now)), (now, now + _latency(rng))
        at = c.stats_at[1]
        for sub_name, sub in sorted(topic.subscriptions.items()):
            c.consumed[sub_name] = sub.consumed()
            if sub.replicated:
                c.statuses[sub_name] = (jackson(replicated_status(topic, sub_name)), at + 1, at + 1 + _latency(rng))
                at = c.statuses[sub_name][2]
        c.replication = {remote: (rep.connected, rep.backlog()) for remote, rep in sorted(topic.replicators.items())}
        size = len(c.read.window)
        c.dump_at = (at + 1, at + 2 + min(size // 100, TOPIC_SLOT_MS // 2))

    def _reread(self, cluster: str, name: str, number: int) -> None:
        read, _ = self._read(cluster, name, number)
        self.rereads.setdefault((cluster, name), []).append(read)

    def read_now(self) -> None:
        """Every topic of every cluster read again now, collection and both reread passes at this one instant, in
        place of the reads made during the simulation: what a collector sees of the world once it has ended (the
        loopback admin server's answers, emit.emit_cluster). For tests that collect the lab over HTTP with the
        collector's clock at the world's: the ground truth then describes that state."""
        self.collections.clear()
        self.rereads.clear()
        for cluster in self.world.cluster_names:
            for topic in self.world.topics_of(cluster):
                read, _ = self._read(cluster, topic.name, PRIMARY)
                read.answered_ms = read.requested_ms
                self.collections[(cluster, topic.name)] = Collection(read)
                self._stats(cluster, topic.name)
                for number in PASSES:
                    self.rereads.setdefault((cluster, topic.name), []).append(
                        Read(**{**read.__dict__, "number": number}))

    def reads_of(self, cluster: str, topic: str) -> list[Read]:
        """Every read of the topic's cursors on the cluster: the collection's, then the rereads."""
        c = self.collections.get((cluster, topic))
        return ([c.read] if c else []) + self.rereads.get((cluster, topic), [])
