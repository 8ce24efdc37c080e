"""A real S3 API over HTTP on loopback: moto's server mode in a thread (pytest plugin module).

Fixtures:
  s3_endpoint  (session)  -> "http://127.0.0.1:<port>"; AWS_* env credentials are "testing"
  s3_bucket    (function) -> name of a fresh, empty bucket on that server (emptied and removed after)
Helpers: s3_client(endpoint), create_bucket(endpoint, name=None) -> name, delete_bucket(endpoint, name),
  open_s3_store(endpoint, uri, **options) -> audit.store ObjectStore with STORE_CREDENTIALS.
"""
from __future__ import annotations

import uuid

import boto3
import pytest
from botocore.config import Config

TEST_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
STORE_CREDENTIALS = {"access_key": "testing", "secret_key": "testing"}  # as audit.store takes them


def open_s3_store(endpoint: str, uri: str, **options):
    from audit.store import open_store

    return open_store(uri, endpoint_url=endpoint, credentials=STORE_CREDENTIALS, **options)


def s3_client(endpoint: str):
    return boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing",
        config=Config(s3={"addressing_style": "path"}, retries={"mode": "standard", "max_attempts": 2}),
    )


def create_bucket(endpoint: str, name: str | None = None) -> str:
    name = name or f"test-{uuid.uuid4().hex[:16]}"
    s3_client(endpoint).create_bucket(Bucket=name)
    return name


def delete_bucket(endpoint: str, name: str) -> None:
    client = s3_client(endpoint)
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", ())]
        if keys:
            client.delete_objects(Bucket=name, Delete={"Objects": keys, "Quiet": True})
    client.delete_bucket(Bucket=name)


@pytest.fixture(scope="session")
def s3_endpoint():
    from moto.server import ThreadedMotoServer

    with pytest.MonkeyPatch.context() as mp:
        for key, value in TEST_CREDENTIALS.items():
            mp.setenv(key, value)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()  # returns once the socket is bound
        try:
            host, port = server.get_host_and_port()
            yield f"http://{host}:{port}"
        finally:
            server.stop()


@pytest.fixture
def s3_bucket(s3_endpoint):
    name = create_bucket(s3_endpoint)
    yield name
    delete_bucket(s3_endpoint, name)
