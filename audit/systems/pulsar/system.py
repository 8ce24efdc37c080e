"""Pulsar: geo-replication, cross-cluster cursor mapping, failover redeliveries and skips, replicated-subscription
snapshots (docs/formats/pulsar.md §2.6). docs/pulsar/ describes it; docs/formats/pulsar.md the formats it reads."""
from __future__ import annotations

from audit.contracts import (CollectRequest, Incident, Lab, Pipeline, RereadRequest, Repair, System, SystemConfig,
                             Validation)
from audit.systems.pulsar.collect.discovery import subject_names
from audit.systems.pulsar.collect.imports import KINDS
from audit.systems.pulsar.config import PulsarCluster, PulsarThresholds
from audit.systems.pulsar.domain.checks import CHECKS
from audit.systems.pulsar.report import SECTION

NAME = "pulsar"


def topic_of_key(key: str) -> tuple[str, ...] | None:
    """The topic a raw key belongs to (`topics/<tenant>/<namespace>/<local>/...`), as its full name and, for a
    partition, its partitioned topic's too; None for keys of the whole cluster."""
    if not key.startswith("topics/"):
        return None
    parts = key.split("/")
    if len(parts) < 5:
        return None
    return subject_names(f"persistent://{parts[1]}/{parts[2]}/{parts[3]}")


def collect(req: CollectRequest):
    """The admin REST collector (source: admin). An incident check's subjects are topic patterns
    (`persistent://tenant/ns/topic*`): it reads only the topics they match."""
    from audit.systems.pulsar.collect.collector import PulsarCollector

    return PulsarCollector(scope=req.scope).collect(req.cluster, req.sink, req.secrets)


def reread(req: RereadRequest) -> dict:
    """Every collected topic's cursors read again through the REST API, in two passes (docs/pulsar/contracts.md
    "Rereads")."""
    from audit.systems.pulsar.collect.reread import reread as reread_admin

    return reread_admin(req)


def normalize(spark, raw_dir: str, tables_dir: str) -> dict:
    from audit.systems.pulsar.transforms.normalize import run

    return run(spark, raw_dir, tables_dir)


def audit(spark, tables_dir: str, attempt_dir: str, request) -> dict:
    from audit.systems.pulsar.transforms.audit import run

    return run(spark, tables_dir, attempt_dir, request)


def sniffers():
    from audit.systems.pulsar.formats.sniff import BY_NAME, SNIFFERS

    return BY_NAME, SNIFFERS


def suites():
    from audit.systems.pulsar.suites import SUITES

    return SUITES


def plan_repairs(outputs):
    from audit.systems.pulsar.repair.plan import plan_run

    return plan_run(outputs)


def repair_actions(plan, cluster, secrets):
    from audit.systems.pulsar.repair.apply import actions

    return actions(plan, cluster, secrets)


def lab_collect(req: CollectRequest):
    from lab.pulsar.plugin import collect as collect_lab

    return collect_lab(req)


def lab_reread(req: RereadRequest) -> dict:
    from lab.pulsar.plugin import reread as reread_lab

    return reread_lab(req)


def lab_config(block):
    from lab.pulsar.config import parse_pulsar_lab

    return parse_pulsar_lab(block)


def lab_scope_truth(truth: dict, scope, cluster) -> dict:
    from lab.pulsar.plugin import scope_truth

    return scope_truth(truth, scope, cluster)


SYSTEM = System(
    name=NAME, title="Pulsar", checks=CHECKS,
    config=SystemConfig(PulsarCluster, PulsarThresholds),
    pipeline=Pipeline(collect=collect, normalize=normalize, audit=audit, import_kinds=KINDS, sniffers=sniffers,
                      reread=reread),
    report=SECTION,
    validation=Validation(suites, {"pulsar_failover": ("metrics", "pulsar_failover")}),
    repair=Repair(plan_repairs, repair_actions),
    lab=Lab(collect=lab_collect, config=lab_config, reread=lab_reread, scope_truth=lab_scope_truth),
    incident=Incident("topic (persistent://tenant/namespace/topic; a partitioned topic's name matches its "
                      "partitions)", topic_of_key),
    benches=("bench.pulsar.bench_failover", "bench.pulsar.bench_incident"),
)
