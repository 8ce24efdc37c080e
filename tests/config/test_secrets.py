"""Secret references resolve from the environment or Airflow connections, and fail naming the field."""
import json

import pytest

from audit.config.model import SecretRef, StoreConfig, StoreCredentials
from audit.config.secrets import ConnectionInfo, SecretError, SecretResolver, resolve_store_access


def fake_connections(**conns):
    def get(conn_id):
        if conn_id not in conns:
            raise LookupError(f"The conn_id `{conn_id}` isn't defined")
        return conns[conn_id]
    return get


def test_env_reference():
    resolver = SecretResolver(environ={"OPS_TOKEN": "Bearer xyz"})
    assert resolver.resolve(SecretRef(env="OPS_TOKEN")) == "Bearer xyz"


def test_missing_env_names_variable_and_field_not_value():
    resolver = SecretResolver(environ={"EMPTY": ""})
    with pytest.raises(SecretError) as info:
        resolver.resolve(SecretRef(env="EMPTY", where="alerts.routes[0].headers_from.Authorization"))
    assert str(info.value) == ("alerts.routes[0].headers_from.Authorization: "
                               "environment variable EMPTY is not set or empty")


def test_airflow_connection_fields():
    conn = ConnectionInfo("hook", login="user", password="pw", host="h", extra={"api_key": "k1"})
    resolver = SecretResolver(environ={}, get_connection=fake_connections(hook=conn))
    assert resolver.resolve(SecretRef(airflow_conn="hook")) == "pw"
    assert resolver.resolve(SecretRef(airflow_conn="hook", field="login")) == "user"
    assert resolver.resolve(SecretRef(airflow_conn="hook", field="extra.api_key")) == "k1"
    with pytest.raises(SecretError, match="has no extra.other"):
        resolver.resolve(SecretRef(airflow_conn="hook", field="extra.other"))
    with pytest.raises(SecretError, match="'missing' not available: The conn_id `missing` isn't defined"):
        resolver.resolve(SecretRef(airflow_conn="missing", where="x"))


def test_store_access_from_key_references():
    store = StoreConfig("s3://b", "http://127.0.0.1:9000", "us-east-1",
                        StoreCredentials(access_key=SecretRef(env="AK"), secret_key=SecretRef(env="SK")))
    access = resolve_store_access(store, SecretResolver(environ={"AK": "a", "SK": "s"}))
    assert access.credentials == {"access_key": "a", "secret_key": "s"}
    assert (access.endpoint_url, access.region) == ("http://127.0.0.1:9000", "us-east-1")


def test_store_access_from_airflow_aws_connection_fills_endpoint_and_region():
    conn = ConnectionInfo("aws_lab", login="AK", password="SK",
                          extra={"endpoint_url": "http://127.0.0.1:5000", "region_name": "eu-west-1"})
    store = StoreConfig("s3://b", credentials=StoreCredentials(airflow_conn="aws_lab"))
    access = resolve_store_access(store, SecretResolver(get_connection=fake_connections(aws_lab=conn)))
    assert access.credentials == {"access_key": "AK", "secret_key": "SK"}
    assert (access.endpoint_url, access.region) == ("http://127.0.0.1:5000", "eu-west-1")
    # The estate's own endpoint wins over the connection's.
    pinned = StoreConfig("s3://b", endpoint_url="http://10.0.0.1:9000",
                         credentials=StoreCredentials(airflow_conn="aws_lab"))
    assert resolve_store_access(pinned, SecretResolver(get_connection=fake_connections(aws_lab=conn))) \
        .endpoint_url == "http://10.0.0.1:9000"


def test_real_airflow_env_connection(monkeypatch):
    # Airflow's own secrets backend: AIRFLOW_CONN_<ID> as JSON, read through airflow.sdk.Connection.
    monkeypatch.setenv("AIRFLOW_CONN_REPLAUDIT_TEST_HOOK", json.dumps(
        {"conn_type": "http", "login": "svc", "password": "s3cr3t-token", "extra": {"api_key": "k9"}}))
    resolver = SecretResolver()
    assert resolver.resolve(SecretRef(airflow_conn="replaudit_test_hook")) == "s3cr3t-token"
    assert resolver.resolve(SecretRef(airflow_conn="replaudit_test_hook", field="extra.api_key")) == "k9"
    with pytest.raises(SecretError, match="replaudit_no_such_conn"):
        resolver.resolve(SecretRef(airflow_conn="replaudit_no_such_conn"))
