"""Pulsar native formats: stats-internal, info-internal, stats, replicated-subscription status, per-entry admin
responses, markers."""
