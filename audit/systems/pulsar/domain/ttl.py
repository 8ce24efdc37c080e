"""Which message TTL a cluster's replicator applies to a topic (docs/pulsar/audit.md "Messages the replicator never
sends"): a replicator acks expired messages unsent (GeoPersistentReplicator.replicateEntries), so the TTL decides
what can never be missing on the remote. The broker knows it; the estate's `pulsar_message_ttl` is the fallback."""
from __future__ import annotations

BROKER, NAMESPACE, ESTATE = "broker", "namespace", "estate"   # where the TTL came from (finding evidence)


def applied_ttl_s(applied: int | None, namespace: int | None, estate: int) -> tuple[int, str]:
    """(messageTTLInSeconds, where from); 0 = no TTL.

    `applied`: the broker's GET .../messageTTL?applied=true (topic policy, else namespace policy, else its
    ttlDurationDefaultInSeconds): what it applies, 0 included. `namespace`: GET /admin/v2/namespaces/{t}/{ns}/
    messageTTL, read from a broker without the topic-level GET (no topic policies there): a value > 0 applies;
    0 or unset leaves the broker's ttlDurationDefaultInSeconds, which no GET of the collector shows. Anything
    else: the estate's value for the namespace."""
    if applied is not None:
        return applied, BROKER
    if namespace:
        return namespace, NAMESPACE
    return estate, ESTATE
