"""Pulsar managed-ledger positions and acknowledgement range sets as plain values
(docs/formats/pulsar.md §2.2, §2.3)."""
