"""The `systems.pulsar` section of an estate file (docs/estate.md, docs/pulsar-contracts.md)."""
from __future__ import annotations

import re
from typing import Any

from audit.config._fields import Reader, join, show
from audit.config.model import SOURCES_PULSAR, PulsarCluster, PulsarDump, SecretRef, Timeouts

# Pulsar cluster names are what brokers put in replicated_from and pulsar.repl.<name>: keep them plain.
PULSAR_CLUSTER_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,62}[A-Za-z0-9])?$")
NAMESPACE_RE = re.compile(r"^[A-Za-z0-9_.=-]+/[A-Za-z0-9_.=-]+$")
TOPIC_RE = re.compile(r"^persistent://[A-Za-z0-9_.=-]+/[A-Za-z0-9_.=-]+/[A-Za-z0-9_.=:%-]+$")
CLUSTER_KEYS = ("name", "source", "admin_url", "token", "namespaces", "topics", "dump", "timeouts", "tls_verify",
                "lab")


def pulsar_clusters(r: Reader, raw: Any, timeouts) -> tuple[PulsarCluster, ...]:
    """`timeouts(r, where, value)` parses a timeouts block (shared with the other systems)."""
    where = "systems.pulsar"
    if raw is None:
        return ()
    if not isinstance(raw, list):
        r.bad(where, "a list of Pulsar clusters", raw)
    clusters, seen = [], {}
    for i, item in enumerate(raw):
        cluster = _cluster(r, join(where, i), item, timeouts)
        if cluster.name in seen:
            r.fail(join(join(where, i), "name"),
                   f"a cluster name unique within {where} (already used by {where}[{seen[cluster.name]}])",
                   f"duplicate {cluster.name!r}")
        seen[cluster.name] = i
        clusters.append(cluster)
    labs = {repr(sorted((c.lab or {}).items())) for c in clusters if c.source == "lab"}
    if len(labs) > 1:
        # Lab clusters are views of one simulated world: they must agree on how it is built.
        r.fail(where, "the same lab mapping on every lab cluster (they are views of one simulated world)",
               f"{len(labs)} different lab mappings")
    return tuple(clusters)


def _cluster(r: Reader, where: str, item: Any, timeouts) -> PulsarCluster:
    r.mapping(where, item, CLUSTER_KEYS, required=("name", "source"))
    name = r.string(join(where, "name"), item["name"], PULSAR_CLUSTER_RE,
                    "the Pulsar cluster name (letters, digits, '-', '_', '.')")
    source = r.choice(join(where, "source"), item["source"], SOURCES_PULSAR)
    lab = item.get("lab")
    if source == "admin":
        if item.get("admin_url") is None:
            r.fail(join(where, "admin_url"), "the admin REST URL (required for source: admin)", "nothing")
        if not item.get("namespaces") and not item.get("topics"):
            r.fail(where, "namespaces and/or topics to audit (required for source: admin)", "neither")
        if lab is not None:
            r.fail(join(where, "lab"), "a lab block only with source: lab", "source 'admin'")
    elif item.get("admin_url") is not None:
        r.fail(join(where, "admin_url"), "no admin_url with source: lab", show(item["admin_url"]))
    token = item.get("token")
    tls_verify = item.get("tls_verify", True)
    if not isinstance(tls_verify, bool):
        r.bad(join(where, "tls_verify"), "true or false", tls_verify)
    if lab is not None and (not isinstance(lab, dict) or not all(isinstance(k, str) for k in lab)):
        r.bad(join(where, "lab"), "a mapping with string keys", lab)
    return PulsarCluster(
        name=name,
        source=source,
        admin_url=r.http_url(join(where, "admin_url"), item["admin_url"]) if source == "admin" else None,
        token=r.secret_ref(join(where, "token"), token) if token is not None else None,
        namespaces=_names(r, join(where, "namespaces"), item.get("namespaces"), NAMESPACE_RE, "tenant/namespace"),
        topics=_names(r, join(where, "topics"), item.get("topics"), TOPIC_RE,
                      "persistent://tenant/namespace/topic"),
        dump=_dump(r, join(where, "dump"), item.get("dump")),
        timeouts=timeouts(r, join(where, "timeouts"), item.get("timeouts")),
        tls_verify=tls_verify,
        lab=dict(lab or {}) if source == "lab" else None,
    )


def _names(r: Reader, where: str, value: Any, pattern: re.Pattern, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        r.bad(where, f"a list of {what}", value)
    names = tuple(r.string(join(where, i), v, pattern, what) for i, v in enumerate(value))
    if len(set(names)) != len(names):
        r.bad(where, "no duplicates", value)
    return names


def _dump(r: Reader, where: str, value: Any) -> PulsarDump:
    if value is None:
        return PulsarDump()
    r.mapping(where, value, ("concurrency", "chunk_entries", "max_entries_per_topic"))
    d = PulsarDump()
    return PulsarDump(
        concurrency=r.integer(join(where, "concurrency"), value["concurrency"], 1)
        if "concurrency" in value else d.concurrency,
        chunk_entries=r.integer(join(where, "chunk_entries"), value["chunk_entries"], 1)
        if "chunk_entries" in value else d.chunk_entries,
        max_entries_per_topic=r.integer(join(where, "max_entries_per_topic"), value["max_entries_per_topic"], 1)
        if "max_entries_per_topic" in value else d.max_entries_per_topic,
    )


__all__ = ["pulsar_clusters", "PulsarCluster", "PulsarDump", "SecretRef", "Timeouts"]
