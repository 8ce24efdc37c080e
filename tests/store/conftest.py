"""One parametrized `store` fixture: every store test runs against a local folder and against S3 over HTTP."""
import pytest

from audit.store import open_store
from tests.s3fixture import open_s3_store


@pytest.fixture(params=["local", "s3"])
def store_kind(request):
    return request.param


@pytest.fixture
def store(store_kind, request, tmp_path):
    if store_kind == "local":
        return open_store(f"file://{tmp_path / 'store'}")
    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = request.getfixturevalue("s3_bucket")
    # A prefix in the URI: keys must land below it, never at the bucket root.
    return open_s3_store(endpoint, f"s3://{bucket}/evidence", region="us-east-1")
