"""Secret references from the estate file, resolved at run time and never written anywhere.

A reference is `{"env": "VAR"}` (an environment variable) or `{"airflow_conn": "conn_id"}` (an Airflow
connection: its password, else the `token` in its extra; `"field"` picks another part), or an
audit.config.model.SecretRef carrying the same attributes. Every resolved value is remembered so `redact()`
can scrub it from error messages and logs before they are stored.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Mapping

REDACTED = "***"
TOKEN_EXTRA_KEY = "token"
CONNECTION_FIELDS = ("password", "login", "host", "schema")
_EXPECTED = 'expected {"env": "VAR"} or {"airflow_conn": "conn_id"[, "field": ...]}'


class SecretError(Exception):
    """A secret reference could not be resolved. `ref` is the reference (never the value), `reason` why."""

    def __init__(self, ref: Any, reason: str):
        self.ref = ref
        self.reason = reason
        super().__init__(f"secret reference {ref!r}: {reason}")


def _airflow_connection(conn_id: str) -> Any:
    """The Airflow connection object (Airflow 3 task SDK; the classic BaseHook when the SDK is absent)."""
    try:
        from airflow.sdk import Connection
    except ImportError:
        from airflow.hooks.base import BaseHook

        return BaseHook.get_connection(conn_id)
    return Connection.get(conn_id)


def _parse_ref(ref: Any) -> tuple[str, str, str | None]:
    """-> (kind "env"|"airflow_conn", name, connection field or None)."""
    if isinstance(ref, Mapping):
        fields = dict(ref)
    elif hasattr(ref, "env") or hasattr(ref, "airflow_conn"):
        fields = {k: getattr(ref, k, None) for k in ("env", "airflow_conn", "field")}
    else:
        raise SecretError(ref, _EXPECTED)
    fields = {k: v for k, v in fields.items() if v is not None}
    kinds = [k for k in ("env", "airflow_conn") if k in fields]
    extra_keys = set(fields) - {"env", "airflow_conn", "field"}
    # A SecretRef object always carries a default `field`; in a mapping it only goes with airflow_conn.
    env_with_field = kinds == ["env"] and "field" in fields and isinstance(ref, Mapping)
    if len(kinds) != 1 or extra_keys or env_with_field:
        raise SecretError(ref, _EXPECTED)
    kind, name = kinds[0], fields[kinds[0]]
    if not isinstance(name, str) or not name:
        raise SecretError(ref, f"expected a non-empty string for {kind!r}")
    conn_field = fields.get("field") if kind == "airflow_conn" else None
    if conn_field is not None and not isinstance(conn_field, str):
        raise SecretError(ref, "field: expected a string")
    return kind, name, conn_field


class SecretResolver:
    def __init__(self, environ: Mapping[str, str] | None = None,
                 get_connection: Callable[[str], Any] | None = None):
        self._environ = os.environ if environ is None else environ
        self._get_connection = get_connection or _airflow_connection
        self._resolved: set[str] = set()

    def resolve(self, ref: Any) -> str:
        """`ref`: a mapping {"env": VAR} / {"airflow_conn": ID[, "field": F]}, or an object with the same
        attributes (audit.config.model.SecretRef). F: password, login, host, schema or extra.<key>; without
        F the connection's password is used, else its extra.token."""
        kind, name, conn_field = _parse_ref(ref)
        if kind == "env":
            value = self._environ.get(name)
            if not value:
                raise SecretError(ref, f"environment variable {name} is not set or empty")
        else:
            value = self._from_connection(ref, name, conn_field)
        self._resolved.add(value)
        return value

    def _from_connection(self, ref: Any, conn_id: str, conn_field: str | None) -> str:
        try:
            conn = self._get_connection(conn_id)
        except Exception as e:  # Airflow raises its own NotFound types; the message names the conn_id only
            raise SecretError(ref, f"Airflow connection {conn_id!r} not available: {type(e).__name__}: {e}") from None
        extra = getattr(conn, "extra_dejson", None) or {}
        if conn_field is not None:
            if conn_field.startswith("extra."):
                value = extra.get(conn_field[len("extra."):])
            elif conn_field in CONNECTION_FIELDS:
                value = getattr(conn, conn_field, None)
            else:
                raise SecretError(ref, f"field {conn_field!r}: expected one of {CONNECTION_FIELDS} or extra.<key>")
            if value in (None, ""):
                raise SecretError(ref, f"Airflow connection {conn_id!r} has no {conn_field}")
            return str(value)
        if conn.password:
            return conn.password
        token = extra.get(TOKEN_EXTRA_KEY)
        if isinstance(token, str) and token:
            return token
        raise SecretError(ref, f"Airflow connection {conn_id!r} has neither a password nor extra.{TOKEN_EXTRA_KEY}")

    def redact(self, text: str) -> str:
        # Longest first, so a secret containing another secret is replaced whole.
        for value in sorted(self._resolved, key=len, reverse=True):
            text = text.replace(value, REDACTED)
        return text
