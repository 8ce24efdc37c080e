"""Collect one lab cluster into memory: the raw keys the pipeline would store, the report and the ground truth."""
from __future__ import annotations

from types import SimpleNamespace

from lab.kafka import runner

AS_OF = 1_760_000_000_000


class DictSink(dict):
    def put(self, key: str, data: bytes) -> None:
        assert key not in self or self[key] == data, key
        self[key] = bytes(data)


def collect(lab: dict, name: str, as_of: int = AS_OF, *, mirrors=(), thresholds=None, fresh: bool = False):
    """(raw keys -> bytes, CollectionReport, truth). `fresh`: simulate again instead of reusing this process's
    memoised world."""
    if fresh:
        runner._worlds.clear()
    sink = DictSink()
    report, truth = runner.collect(SimpleNamespace(name=name, lab=lab, mirrors=mirrors), sink, None, as_of,
                                   thresholds)
    return sink, report, truth


def findings(truth: dict, check: str | None = None) -> list[dict]:
    return [f for f in truth["findings"] if check is None or f["check"] == check]


def cluster(name: str, policy: str, *scenarios: str, **more) -> dict:
    return {"name": name, "policy": policy, "scenarios": list(scenarios), **more}
