"""Consumer groups on a simulated cluster: each group reads its topic's partitions up to the high watermark (a
consumer never sees uncommitted data), at its own pace, and commits its position every auto.commit.interval
(5 s). A position is always the offset after the last batch the consumer fetched, control batches (transaction
markers) included: the consumer skips them but its position moves past them."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from lab.kafka.cluster import Cluster

AUTO_COMMIT_MS = 5_000


@dataclass
class GroupConsumer:
    group: str
    cluster: Cluster
    topic: str
    rng: random.Random
    lag_records: int = 0                 # how far behind the high watermark it keeps itself (about)
    poll_min_ms: int = 200
    poll_max_ms: int = 800
    stop_ms: int | None = None           # the consumer stops (its last commit stays)
    positions: dict[int, int] = field(default_factory=dict)
    commits: list[tuple[int, int, int]] = field(default_factory=list)   # (at_ms, partition, offset)

    def start(self, start_ms: int, until_ms: int) -> None:
        self.until_ms = until_ms
        self.cluster.clock.at(start_ms + self.rng.randint(self.poll_min_ms, self.poll_max_ms), self._poll)
        self.cluster.clock.every(start_ms + self.rng.randrange(AUTO_COMMIT_MS), AUTO_COMMIT_MS, self._commit,
                                 until_ms)

    def _stopped(self) -> bool:
        return self.stop_ms is not None and self.cluster.clock.now >= self.stop_ms

    def _poll(self) -> None:
        if self._stopped():
            return
        c = self.cluster
        for p in range(c.topics[self.topic].partitions):
            log = c.leader_log(c.partitions[(self.topic, p)])
            if log is None:
                continue
            pos = max(self.positions.get(p, 0), log.log_start)
            target = log.hw - self.lag_records - self.rng.randint(0, max(1, self.lag_records // 4))
            if target <= pos:
                self.positions[p] = pos
                continue
            for b in log.batches_from(pos, 10_000):
                if b.last >= log.hw or b.base >= target:
                    break
                pos = b.last + 1
            self.positions[p] = pos
        nxt = c.clock.now + self.rng.randint(self.poll_min_ms, self.poll_max_ms)
        if nxt < self.until_ms:
            c.clock.at(nxt, self._poll)

    def _commit(self) -> None:
        if self._stopped():
            return
        offsets = self.cluster.groups.setdefault(self.group, {})
        for p, pos in sorted(self.positions.items()):
            if offsets.get((self.topic, p)) != pos:
                offsets[(self.topic, p)] = pos
                self.commits.append((self.cluster.clock.now, p, pos))

