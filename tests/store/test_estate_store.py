"""From estate file to a working store: references resolved at open time, never stored in the file."""
import pytest

from audit.config import SecretError, SecretResolver, load_estate
from audit.store import open_estate_store
from audit.store.local import LocalStore
from audit.store.s3 import S3Store


def test_estate_with_s3_store_and_env_credentials(tmp_path, s3_endpoint, s3_bucket):
    path = tmp_path / "estate.yaml"
    path.write_text(f"""\
estate: e
store:
  uri: s3://{s3_bucket}/replaudit
  endpoint_url: {s3_endpoint}
  region: us-east-1
  credentials: {{access_key: {{env: LAB_S3_KEY}}, secret_key: {{env: LAB_S3_SECRET}}}}
systems: {{}}
""")
    estate = load_estate(path, home=tmp_path)
    store = open_estate_store(estate.store, SecretResolver(environ={"LAB_S3_KEY": "testing",
                                                                      "LAB_S3_SECRET": "testing"}))
    assert isinstance(store, S3Store)
    store.put("e/x", b"1")
    assert list(store.list("e/")) == ["e/x"]
    with pytest.raises(SecretError, match="store.credentials.access_key: environment variable LAB_S3_KEY"):
        open_estate_store(estate.store, SecretResolver(environ={}))


def test_estate_with_local_store(tmp_path):
    path = tmp_path / "estate.yaml"
    path.write_text("estate: e\nstore: {uri: 'file://out/store'}\nsystems: {}\n")
    store = open_estate_store(load_estate(path, home=tmp_path).store)
    assert isinstance(store, LocalStore) and store.root == (tmp_path / "out" / "store").resolve()
