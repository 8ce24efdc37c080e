"""Which part of a system reads a cluster: its lab (source: lab) or its real collector, and, for an incident check,
the evidence and ground truth narrowed to the scope. The same for every system (contracts.Pipeline, Lab)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from audit.collectors.base import ScopedSink
from audit.contracts import CollectRequest, RereadRequest, System

LAB_SOURCE = "lab"


def is_lab(cluster: Any) -> bool:
    return getattr(cluster, "source", None) == LAB_SOURCE


def collect(system: System, req: CollectRequest) -> tuple[Any, dict | None]:
    """-> (CollectionReport, the lab's ground truth or None)."""
    if not is_lab(req.cluster):
        return system.pipeline.collect(req), None
    if system.lab is None:
        raise ValueError(f"systems.{system.name}: {req.cluster.name}: source 'lab': {system.title} has no lab")
    scoped = bool(req.scope.subjects) and system.incident is not None
    if scoped:
        req = replace(req, sink=ScopedSink(req.sink, system.incident.subjects_of_key, req.scope))
    report, truth = system.lab.collect(req)
    if scoped and system.lab.scope_truth is not None:
        truth = system.lab.scope_truth(truth, req.scope, req.cluster)
    return report, truth


def rereads(system: System) -> bool:
    return system.pipeline.reread is not None or (system.lab is not None and system.lab.reread is not None)


def reread(system: System, req: RereadRequest) -> Mapping[str, Any]:
    """The system's reread over its lab clusters (by their simulation) and its real ones (by its collector)."""
    reports: dict[str, Any] = {}
    lab = tuple(c for c in req.clusters if is_lab(c))
    real = tuple(c for c in req.clusters if not is_lab(c))
    if lab and system.lab is not None and system.lab.reread is not None:
        reports.update(system.lab.reread(replace(req, clusters=lab)))
    if real and system.pipeline.reread is not None:
        reports.update(system.pipeline.reread(replace(req, clusters=real)))
    return reports
