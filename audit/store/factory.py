"""Opening a store from its URI or from an estate's store section: the one module that knows the
implementations (base.py holds only the interface and the key helpers they share).

boto3 (S3Store) and the estate's secret resolution load on first use, so `import audit.store` stays cheap."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from audit.store.base import ObjectStore, StoreError
from audit.store.local import LocalStore


def open_store(uri: str, endpoint_url: str | None = None, region: str | None = None,
               credentials: Mapping[str, str] | None = None, **s3_options) -> ObjectStore:
    """`file://<path>` (relative paths against the current directory) or `s3://bucket[/prefix]`.
    `credentials`: resolved {"access_key", "secret_key"[, "session_token"]} or None for boto3's
    default chain. `s3_options` go to S3Store (max_attempts, connect_timeout, read_timeout, ...)."""
    if uri.startswith("file://"):
        if endpoint_url or credentials:
            raise StoreError(uri, "", "endpoint_url/credentials only apply to s3:// stores")
        return LocalStore(Path(uri[len("file://"):]))
    if uri.startswith("s3://"):
        from audit.store.s3 import S3Store  # boto3: only for an s3:// store

        bucket, _, prefix = uri[len("s3://"):].partition("/")
        return S3Store(bucket, prefix, endpoint_url=endpoint_url, region=region,
                       credentials=credentials, **s3_options)
    raise StoreError(uri, "", "expected a file://<path> or s3://<bucket>[/<prefix>] URI")


def open_estate_store(store_config, secrets=None, **s3_options) -> ObjectStore:
    """Open an estate's store (audit.config StoreConfig), resolving its credential references."""
    from audit.config.secrets import SecretResolver, resolve_store_access  # the estate model: only when used

    if store_config.scheme == "file":
        return open_store(store_config.uri)
    access = resolve_store_access(store_config, secrets or SecretResolver())
    return open_store(store_config.uri, access.endpoint_url, access.region, access.credentials, **s3_options)
