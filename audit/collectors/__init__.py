"""Collectors: read-only clients that copy each system's native state into the raw store (see base.py)."""
