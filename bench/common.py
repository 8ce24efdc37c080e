"""What every bench module repeats: its result rows, its `python -m` entry point, an in-memory sink, the lab's ground
truth and an incident check of the lab."""
from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator


class Results(list):
    """The rows `metrics()` returns ({name, value, unit, target, ok}), each printed as it is measured."""

    def add(self, name: str, value: float, unit: str, target: str | None, ok: bool = True) -> None:
        self.append({"name": name, "value": round(value, 3), "unit": unit, "target": target, "ok": ok})
        print(f"{name:58s} {value:14.3f} {unit:10s} target {target}", flush=True)


def main_of(metrics: Callable[[list[str] | None], list[dict]], argv: list[str] | None = None) -> int:
    """A bench module run alone: its rows as JSON; exit 1 when a target is missed."""
    results = metrics(argv)
    print(json.dumps(results, indent=1))
    return 0 if all(r["ok"] for r in results) else 1


REPO = Path(__file__).resolve().parent.parent
LAB_ESTATE = REPO / "lab" / "estate.yaml"     # the built-in lab estate (`make audit`)


class MemorySink:
    """A RawSink keeping bytes in a dict: isolates a collector (or a lab) from storage speed."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def put(self, relative_key: str, data: bytes) -> None:
        self.objects[relative_key] = data


def lab_truths(system: str, as_of_ms: int) -> dict[str, dict]:
    """{cluster: ground truth} of the built-in lab estate's lab clusters of `system` at `as_of_ms`: what the lab's
    collect returns beside its raw payloads (raw/_lab/<cluster>/ground_truth.json in a run). A bench picks its
    subject here, never by a literal id: the lab's ids change whenever its simulation does."""
    from audit import systems
    from audit.collectors import dispatch
    from audit.config.estate import load_estate
    from audit.contracts import CollectRequest

    estate = load_estate(str(LAB_ESTATE))
    s = systems.get(system)
    out: dict[str, dict] = {}
    for cluster in estate.clusters(system):
        if not dispatch.is_lab(cluster):
            continue
        _, truth = dispatch.collect(s, CollectRequest(cluster, MemorySink(), None, as_of_ms, estate.thresholds))
        if truth is not None:
            out[cluster.name] = truth
    if not out:
        raise LookupError(f"{LAB_ESTATE}: no lab cluster of {system} gave a ground truth")
    return out


def now_ms() -> int:
    import time

    return int(time.time() * 1000)


@contextmanager
def lab_incident_check(scope: Any, as_of_ms: int | None = None) -> Iterator[tuple[dict, float, Path]]:
    """An incident check (`pipeline.run_all` with `scope`, at `as_of_ms`: the instant its subject was picked from
    `lab_truths`) of the built-in lab estate, its store in a temporary folder removed afterwards: yields (summary,
    seconds it took, the store's root)."""
    import shutil
    import tempfile
    import time

    import yaml

    from audit import pipeline

    work = Path(tempfile.mkdtemp(prefix="replaudit-bench-incident-"))
    try:
        estate = yaml.safe_load(LAB_ESTATE.read_text())
        estate["store"] = {"uri": f"file://{work / 'store'}"}
        path = work / "estate.yaml"
        path.write_text(yaml.safe_dump(estate))
        started = time.perf_counter()
        summary = pipeline.run_all(str(path), as_of_ms=as_of_ms, scope=scope)
        yield summary, time.perf_counter() - started, work / "store"
    finally:
        shutil.rmtree(work, ignore_errors=True)
