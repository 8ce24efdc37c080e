"""S3Store: any S3 API (AWS, MinIO, Ceph RGW, moto) through boto3."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator, Mapping

import boto3
from boto3.exceptions import S3UploadFailedError
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from audit.store.base import ObjectNotFound, ObjectStore, StoreError, check_key, check_prefix, folder

_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}


class S3Store(ObjectStore):
    """Keys live under `s3://bucket/prefix/`. With an endpoint override (MinIO, Ceph, moto) requests use
    path-style addressing and send checksums only when the operation requires them, which older
    S3-compatible servers need. Transient errors (5xx, throttling, connection resets) are retried by
    botocore's "standard" mode with exponential backoff and jitter, up to `max_attempts` tries in all."""

    def __init__(self, bucket: str, prefix: str = "", *, endpoint_url: str | None = None,
                 region: str | None = None, credentials: Mapping[str, str] | None = None,
                 max_attempts: int = 5, connect_timeout: float = 10, read_timeout: float = 60,
                 multipart_threshold: int = 16 * 1024 * 1024, multipart_chunksize: int = 16 * 1024 * 1024):
        self.bucket = bucket
        self.prefix = folder(prefix)
        self.uri = f"s3://{bucket}/{self.prefix}".rstrip("/")
        custom = endpoint_url is not None
        config = Config(
            retries={"mode": "standard", "total_max_attempts": max_attempts},  # first try included
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            s3={"addressing_style": "path" if custom else "auto"},
            request_checksum_calculation="when_required" if custom else "when_supported",
            response_checksum_validation="when_required" if custom else "when_supported",
        )
        creds = dict(credentials or {})
        session = boto3.session.Session(
            aws_access_key_id=creds.get("access_key"),
            aws_secret_access_key=creds.get("secret_key"),
            aws_session_token=creds.get("session_token"),
            region_name=region,
        )
        self._client = session.client("s3", endpoint_url=endpoint_url, config=config)
        self._transfer = TransferConfig(multipart_threshold=multipart_threshold,
                                        multipart_chunksize=multipart_chunksize)

    def _full(self, key: str) -> str:
        return self.prefix + check_key(key, self.uri)

    def _fail(self, key: str, action: str, exc: Exception) -> StoreError:
        code = exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else ""
        if code in _NOT_FOUND:
            return ObjectNotFound(self.uri, key, "no such object")
        return StoreError(self.uri, key, f"{action} failed: {exc}")

    def put(self, key: str, data: bytes) -> None:
        try:
            self._client.put_object(Bucket=self.bucket, Key=self._full(key), Body=data)
        except (ClientError, BotoCoreError) as exc:
            raise self._fail(key, "put", exc) from exc

    def get(self, key: str) -> bytes:
        try:
            return self._client.get_object(Bucket=self.bucket, Key=self._full(key))["Body"].read()
        except (ClientError, BotoCoreError) as exc:
            raise self._fail(key, "get", exc) from exc

    def exists(self, key: str) -> bool:
        try:
            self._client.head_object(Bucket=self.bucket, Key=self._full(key))
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code", "") in _NOT_FOUND:
                return False
            raise self._fail(key, "head", exc) from exc
        except BotoCoreError as exc:
            raise self._fail(key, "head", exc) from exc

    def _pages(self, prefix: str, **kwargs) -> Iterator[dict]:
        check_prefix(prefix, self.uri)
        paginator = self._client.get_paginator("list_objects_v2")
        try:
            yield from paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + prefix, **kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise self._fail(prefix, "list", exc) from exc

    def list(self, prefix: str = "") -> Iterator[str]:
        cut = len(self.prefix)
        for page in self._pages(prefix):
            for item in page.get("Contents", ()):
                yield item["Key"][cut:]

    def list_prefixes(self, prefix: str) -> Iterator[str]:
        base = folder(prefix)
        cut = len(self.prefix) + len(base)
        for page in self._pages(base, Delimiter="/"):
            for item in page.get("CommonPrefixes", ()):
                yield item["Prefix"][cut:].rstrip("/")

    def delete(self, keys: Iterable[str]) -> int:
        keys = list(keys)
        for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
            batch = keys[start:start + 1000]
            try:
                answer = self._client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": self._full(k)} for k in batch], "Quiet": True})
            except (ClientError, BotoCoreError) as exc:
                raise self._fail(batch[0], "delete", exc) from exc
            errors = answer.get("Errors") or []
            if errors:
                first = errors[0]
                raise StoreError(self.uri, first.get("Key", "")[len(self.prefix):],
                                 f"delete failed for {len(errors)} keys: {first.get('Code')} {first.get('Message')}")
        return len(keys)

    def upload_file(self, local_path: str | Path, key: str) -> None:
        # upload_file switches to a multipart upload above multipart_threshold.
        try:
            self._client.upload_file(str(local_path), self.bucket, self._full(key), Config=self._transfer)
        except (ClientError, BotoCoreError, S3UploadFailedError) as exc:
            raise self._fail(key, "upload", exc) from exc

    def download_file(self, key: str, local_path: str | Path) -> None:
        Path(local_path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._client.download_file(self.bucket, self._full(key), str(local_path), Config=self._transfer)
        except (ClientError, BotoCoreError) as exc:
            raise self._fail(key, "download", exc) from exc
