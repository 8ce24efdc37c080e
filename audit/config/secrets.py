"""Turn secret references into values at the moment of use. Values are never logged or stored.

A reference is an audit.config.model.SecretRef (or any object with its `env` / `airflow_conn` / `field` /
`where` attributes) or the same as a mapping: `{"env": "VAR"}` or `{"airflow_conn": "conn_id"[, "field": F]}`.
F is password (the default: the connection's password, else the `token` in its extra), login, host, schema
or `extra.<key>`. Every resolved value is remembered so `redact()` can scrub it from texts before they are
stored. A SecretError names the estate field (`ref.where`) when the reference carries one.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple

from audit.config.model import CONNECTION_FIELDS, EXTRA_PREFIX, SecretRef, StoreConfig, is_connection_field

REDACTED = "***"
TOKEN_EXTRA_KEY = "token"  # fallback for the default field when a connection has no password
_DEFAULT_FIELD = "password"
_EXPECTED = 'a reference {"env": "VAR"} or {"airflow_conn": "conn_id"[, "field": ...]}'


class SecretError(LookupError):
    """A reference that cannot be resolved. `ref` is the reference (never the value), `message` why;
    the text starts with the estate field using the reference when it has a `where`."""

    def __init__(self, ref: Any, message: str):
        self.ref = ref
        self.message = message
        where = getattr(ref, "where", None)
        super().__init__(f"{where}: {message}" if isinstance(where, str) and where else message)


@dataclass(frozen=True)
class ConnectionInfo:
    """The parts of an Airflow connection replaudit uses."""

    conn_id: str
    login: str | None = None
    password: str | None = None
    host: str | None = None
    schema: str | None = None
    port: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, conn_id: str, conn: Any) -> "ConnectionInfo":
        """From an Airflow Connection (or anything with its attributes; `extra_dejson` is its parsed extra)."""
        if isinstance(conn, ConnectionInfo):
            return conn
        extra = getattr(conn, "extra_dejson", None)
        if extra is None and isinstance(getattr(conn, "extra", None), Mapping):
            extra = conn.extra
        return cls(conn_id=conn_id, login=getattr(conn, "login", None), password=getattr(conn, "password", None),
                   host=getattr(conn, "host", None), schema=getattr(conn, "schema", None),
                   port=getattr(conn, "port", None), extra=dict(extra or {}))


def _airflow_connection(conn_id: str) -> Any:
    # Imported lazily: importing Airflow costs seconds and reads AIRFLOW_HOME.
    try:
        from airflow.sdk import Connection
    except ImportError:  # Airflow 2 has no task SDK
        from airflow.hooks.base import BaseHook

        return BaseHook.get_connection(conn_id)
    return Connection.get(conn_id)


class _Parsed(NamedTuple):
    kind: str  # "env" | "airflow_conn"
    name: str
    part: str | None  # connection field; None for env


def _malformed(ref: Any) -> SecretError:
    # The keys are shown, never the values: a literal in place of a reference may be the secret itself.
    got = f"keys {sorted(map(str, ref))}" if isinstance(ref, Mapping) else f"a {type(ref).__name__} (not shown)"
    return SecretError(ref, f"expected {_EXPECTED}, got {got}")


def _parse_ref(ref: Any) -> _Parsed:
    if isinstance(ref, Mapping):
        fields = {k: v for k, v in ref.items() if v is not None}
        if set(fields) - {"env", "airflow_conn", "field"} or ("env" in fields and "field" in fields):
            raise _malformed(ref)
    elif hasattr(ref, "env") or hasattr(ref, "airflow_conn"):
        fields = {k: getattr(ref, k, None) for k in ("env", "airflow_conn", "field")}
        fields = {k: v for k, v in fields.items() if v is not None}
        if "env" in fields:
            fields.pop("field", None)  # a SecretRef always carries the default field
    else:
        raise _malformed(ref)
    kinds = [k for k in ("env", "airflow_conn") if k in fields]
    if len(kinds) != 1:
        raise _malformed(ref)
    kind = kinds[0]
    name = fields[kind]
    if not isinstance(name, str) or not name:
        raise SecretError(ref, f"{kind}: expected a non-empty string")
    if kind == "env":
        return _Parsed(kind, name, None)
    part = fields.get("field", _DEFAULT_FIELD)
    if not is_connection_field(part):
        raise SecretError(ref, f"field {part!r}: expected one of {', '.join(CONNECTION_FIELDS)} or extra.<key>")
    return _Parsed(kind, name, part)


def _present(value: Any) -> bool:
    return value is not None and value != ""


def _connection_part(conn: ConnectionInfo, part: str, ref: Any) -> str:
    value = conn.extra.get(part[len(EXTRA_PREFIX):]) if part.startswith(EXTRA_PREFIX) else getattr(conn, part)
    if _present(value):
        return str(value)
    if part == _DEFAULT_FIELD:
        token = conn.extra.get(TOKEN_EXTRA_KEY)
        if isinstance(token, str) and token:
            return token
        raise SecretError(ref, f"Airflow connection {conn.conn_id!r} has neither a password nor "
                               f"extra.{TOKEN_EXTRA_KEY}")
    raise SecretError(ref, f"Airflow connection {conn.conn_id!r} has no {part}")


class SecretResolver:
    """Resolves env references from `environ` (default os.environ) and Airflow connections through
    `get_connection` (default: Airflow's secrets backends, including AIRFLOW_CONN_<ID> variables). Both
    sources are injectable; `get_connection` may return a ConnectionInfo or an Airflow-like connection."""

    def __init__(self, environ: Mapping[str, str] | None = None,
                 get_connection: Callable[[str], Any] | None = None):
        self._environ = os.environ if environ is None else environ
        self._get_connection = get_connection or _airflow_connection
        self._resolved: set[str] = set()

    def resolve(self, ref: Any) -> str:
        kind, name, part = _parse_ref(ref)
        if kind == "env":
            value = self._environ.get(name)
            if not value:
                raise SecretError(ref, f"environment variable {name} is not set or empty")
        else:
            value = _connection_part(self.connection(name, ref), part, ref)
        self.remember(value)
        return value

    def connection(self, conn_id: str, ref: Any = None) -> ConnectionInfo:
        """The whole connection. Its values are not remembered for redact(): callers `remember` the
        parts they use as secrets."""
        try:
            conn = self._get_connection(conn_id)
        except SecretError:
            raise
        except Exception as exc:  # Airflow raises its own NotFound types; keep the reason, not the type
            ref = ref if ref is not None else SecretRef(airflow_conn=conn_id)
            raise SecretError(ref, f"Airflow connection {conn_id!r} not available: {exc}") from exc
        return ConnectionInfo.of(conn_id, conn)

    def remember(self, value: str) -> None:
        """Have redact() scrub `value` too."""
        if value:
            self._resolved.add(value)

    def redact(self, text: str) -> str:
        # Longest first, so a secret containing another secret is replaced whole.
        for value in sorted(self._resolved, key=len, reverse=True):
            text = text.replace(value, REDACTED)
        return text


@dataclass(frozen=True)
class S3Access:
    """Resolved arguments for audit.store.open_store (credentials None = boto3's default chain)."""

    endpoint_url: str | None
    region: str | None
    credentials: Mapping[str, str] | None  # access_key, secret_key[, session_token]


def resolve_store_access(store: StoreConfig, secrets: SecretResolver) -> S3Access:
    """Resolve the store's credential references; an Airflow AWS connection may also supply
    endpoint_url and region_name in its extra when the estate leaves them unset."""
    creds = store.credentials
    endpoint, region = store.endpoint_url, store.region
    if creds is None:
        return S3Access(endpoint, region, None)
    if creds.airflow_conn is not None:
        ref = SecretRef(airflow_conn=creds.airflow_conn, where="store.credentials")
        conn = secrets.connection(creds.airflow_conn, ref)
        if not conn.login or not conn.password:
            raise SecretError(ref, f"Airflow connection {creds.airflow_conn!r} needs login (access key) "
                                   "and password (secret key)")
        resolved = {"access_key": conn.login, "secret_key": conn.password}
        token = conn.extra.get("aws_session_token")
        if token:
            resolved["session_token"] = str(token)
        for value in resolved.values():
            secrets.remember(value)
        endpoint = endpoint or conn.extra.get("endpoint_url")
        region = region or conn.extra.get("region_name")
        return S3Access(endpoint, region, resolved)
    resolved = {"access_key": secrets.resolve(creds.access_key), "secret_key": secrets.resolve(creds.secret_key)}
    if creds.session_token is not None:
        resolved["session_token"] = secrets.resolve(creds.session_token)
    return S3Access(endpoint, region, resolved)
