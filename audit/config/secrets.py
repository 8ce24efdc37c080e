"""Turn SecretRefs into values at the moment of use. Values are never logged or stored."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from audit.config.model import SecretRef, StoreConfig


class SecretError(LookupError):
    """A reference that cannot be resolved; names the reference and the estate field using it."""

    def __init__(self, ref: SecretRef | None, message: str):
        self.ref = ref
        self.message = message
        where = f"{ref.where}: " if ref is not None and ref.where else ""
        super().__init__(f"{where}{message}")


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


def _airflow_connection(conn_id: str) -> ConnectionInfo:
    # Imported lazily: importing Airflow costs seconds and reads AIRFLOW_HOME.
    from airflow.sdk import Connection

    conn = Connection.get(conn_id)
    return ConnectionInfo(conn_id=conn_id, login=conn.login, password=conn.password, host=conn.host,
                          schema=conn.schema, port=conn.port, extra=dict(conn.extra_dejson or {}))


class SecretResolver:
    """Resolves {env: NAME} from `environ` (default os.environ) and {airflow_conn: ID} through Airflow
    (its secrets backends, including AIRFLOW_CONN_<ID> variables). Both sources are injectable."""

    def __init__(self, environ: Mapping[str, str] | None = None,
                 get_connection: Callable[[str], ConnectionInfo] | None = None):
        self._environ = environ if environ is not None else os.environ
        self._get_connection = get_connection or _airflow_connection

    def resolve(self, ref: SecretRef) -> str:
        if ref.env is not None:
            value = self._environ.get(ref.env)
            if not value:
                raise SecretError(ref, f"environment variable {ref.env} is not set or empty")
            return value
        conn = self.connection(ref.airflow_conn, ref)
        if ref.field.startswith("extra."):
            value = conn.extra.get(ref.field[len("extra."):])
        else:
            value = getattr(conn, ref.field)
        if value in (None, ""):
            raise SecretError(ref, f"Airflow connection {conn.conn_id!r} has no {ref.field}")
        return str(value)

    def connection(self, conn_id: str, ref: SecretRef | None = None) -> ConnectionInfo:
        try:
            return self._get_connection(conn_id)
        except SecretError:
            raise
        except Exception as exc:  # Airflow raises its own NotFound types; keep the reason, not the type
            ref = ref or SecretRef(airflow_conn=conn_id)
            raise SecretError(ref, f"Airflow connection {conn_id!r} not available: {exc}") from exc


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
        endpoint = endpoint or conn.extra.get("endpoint_url")
        region = region or conn.extra.get("region_name")
        return S3Access(endpoint, region, resolved)
    resolved = {"access_key": secrets.resolve(creds.access_key), "secret_key": secrets.resolve(creds.secret_key)}
    if creds.session_token is not None:
        resolved["session_token"] = secrets.resolve(creds.session_token)
    return S3Access(endpoint, region, resolved)
