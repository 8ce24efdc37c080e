"""Virtual time for the Kafka lab: a discrete-event loop in milliseconds (no threads, no sleeping) and random
streams seeded per component, so that adding a component never shifts another one's draws."""
from __future__ import annotations

import heapq
import random
from typing import Any, Callable


def stream(seed: int, *parts: object) -> random.Random:
    """A random stream named by the world's seed and the component's path (str seeds hash the same in every
    process)."""
    return random.Random(":".join(["kafka-lab", str(seed), *map(str, parts)]))


class Clock:
    """Events run in (time, insertion order); an event may schedule others, also at the current instant."""

    def __init__(self, start_ms: int):
        self.now = start_ms
        self._queue: list[tuple[int, int, Callable[..., Any], tuple]] = []
        self._seq = 0

    def at(self, when_ms: int, fn: Callable[..., Any], *args: Any) -> None:
        if when_ms < self.now:
            when_ms = self.now
        self._seq += 1
        heapq.heappush(self._queue, (when_ms, self._seq, fn, args))

    def after(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> None:
        self.at(self.now + delay_ms, fn, *args)

    def every(self, first_ms: int, period_ms: int, fn: Callable[[], Any], until_ms: int | None = None) -> None:
        """Run fn at first_ms and every period_ms after it (until until_ms, exclusive)."""
        def tick() -> None:
            fn()
            nxt = self.now + period_ms
            if until_ms is None or nxt < until_ms:
                self.at(nxt, tick)
        if until_ms is None or first_ms < until_ms:
            self.at(first_ms, tick)

    def run_until(self, end_ms: int) -> None:
        """Run every event due at or before end_ms; the clock then reads end_ms."""
        q = self._queue
        while q and q[0][0] <= end_ms:
            when, _, fn, args = heapq.heappop(q)
            self.now = when
            fn(*args)
        self.now = max(self.now, end_ms)
