"""Pulsar managed-ledger positions and acknowledgement range sets as plain values (formats.md §2.2, §2.3)."""
