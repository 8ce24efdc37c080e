"""Pulsar admin REST collector (docs/pulsar/collector.md)."""
