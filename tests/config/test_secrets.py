"""Secret references resolve from the environment or Airflow connections, fail naming the field, and are
remembered for redaction."""
import json
from types import SimpleNamespace

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


def test_env_reference_as_mapping_resolves_and_is_redacted():
    s = SecretResolver(environ={"ZK_DIGEST": "auditor:pw-123", "EMPTY": ""})
    assert s.resolve({"env": "ZK_DIGEST"}) == "auditor:pw-123"
    assert s.redact("auth failed for auditor:pw-123 at zk1") == "auth failed for *** at zk1"
    assert s.resolve(SecretRef(env="ZK_DIGEST")) == "auditor:pw-123"
    with pytest.raises(SecretError, match="MISSING") as e:
        s.resolve({"env": "MISSING"})
    assert e.value.ref == {"env": "MISSING"}
    assert str(e.value) == "environment variable MISSING is not set or empty"  # a mapping has no estate field
    with pytest.raises(SecretError, match="EMPTY"):
        s.resolve({"env": "EMPTY"})


def test_missing_env_names_variable_and_field_not_value():
    resolver = SecretResolver(environ={"EMPTY": ""})
    with pytest.raises(SecretError) as info:
        resolver.resolve(SecretRef(env="EMPTY", where="alerts.routes[0].headers_from.Authorization"))
    assert str(info.value) == ("alerts.routes[0].headers_from.Authorization: "
                               "environment variable EMPTY is not set or empty")


@pytest.mark.parametrize("ref", [{}, {"env": "A", "airflow_conn": "b"}, {"vault": "x"}, {"env": ""}, "ENV",
                                 {"env": "A", "field": "password"}, SecretRef(),
                                 SecretRef(env="A", airflow_conn="b"), {"airflow_conn": "c", "field": "port"},
                                 SecretRef(airflow_conn="c", field="extra.")])
def test_malformed_references_are_rejected(ref):
    with pytest.raises(SecretError):
        SecretResolver(environ={"A": "v"}, get_connection=fake_connections(c=ConnectionInfo("c"))).resolve(ref)


def test_malformed_reference_error_does_not_echo_a_literal():
    with pytest.raises(SecretError) as e:
        SecretResolver(environ={}).resolve("hunter2-literal")
    assert "hunter2" not in str(e.value) and "a str (not shown)" in str(e.value)
    with pytest.raises(SecretError) as e:
        SecretResolver(environ={}).resolve({"token": "hunter2-literal"})
    assert "hunter2" not in str(e.value) and "keys ['token']" in str(e.value)


def test_airflow_connection_fields():
    conn = ConnectionInfo("hook", login="user", password="pw", host="h", extra={"api_key": "k1"})
    resolver = SecretResolver(environ={}, get_connection=fake_connections(hook=conn))
    assert resolver.resolve(SecretRef(airflow_conn="hook")) == "pw"
    assert resolver.resolve(SecretRef(airflow_conn="hook", field="login")) == "user"
    assert resolver.resolve(SecretRef(airflow_conn="hook", field="extra.api_key")) == "k1"
    with pytest.raises(SecretError, match="has no extra.other"):
        resolver.resolve(SecretRef(airflow_conn="hook", field="extra.other"))
    with pytest.raises(SecretError, match="^x: Airflow connection 'missing' not available: "
                                          "The conn_id `missing` isn't defined"):
        resolver.resolve(SecretRef(airflow_conn="missing", where="x"))


def test_airflow_connection_password_then_token_then_field():
    # Airflow-like connection objects (extra parsed as extra_dejson), not only ConnectionInfo.
    s = SecretResolver(environ={}, get_connection=fake_connections(
        with_pw=SimpleNamespace(password="pw-abc", login="me", extra_dejson={"token": "tok"}),
        token_only=SimpleNamespace(password=None, login=None, extra_dejson={"token": "tok-xyz"}),
        nothing=SimpleNamespace(password="", login=None, extra_dejson={})))
    assert s.resolve({"airflow_conn": "with_pw"}) == "pw-abc"
    assert s.resolve({"airflow_conn": "token_only"}) == "tok-xyz"
    assert s.resolve(SecretRef(airflow_conn="token_only")) == "tok-xyz"
    assert s.resolve({"airflow_conn": "with_pw", "field": "login"}) == "me"
    assert s.resolve(SecretRef(airflow_conn="with_pw", field="extra.token")) == "tok"
    with pytest.raises(SecretError, match="'nothing' has neither"):
        s.resolve({"airflow_conn": "nothing"})
    with pytest.raises(SecretError, match="^f.g: Airflow connection 'nothing' has neither"):
        s.resolve(SecretRef(airflow_conn="nothing", where="f.g"))
    with pytest.raises(SecretError, match="'nothing' has no login"):
        s.resolve({"airflow_conn": "nothing", "field": "login"})
    with pytest.raises(SecretError, match="'absent' not available"):
        s.resolve({"airflow_conn": "absent"})
    assert s.redact("pw-abc tok-xyz me") == "*** *** ***"
    assert s.connection("with_pw") == ConnectionInfo("with_pw", login="me", password="pw-abc",
                                                     extra={"token": "tok"})


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


def test_store_access_credentials_are_redacted_and_incomplete_connection_names_the_field():
    conns = fake_connections(aws=ConnectionInfo("aws", login="AKIA-ID", password="wJalr-secret",
                                                extra={"aws_session_token": "sess-tok"}),
                             half=ConnectionInfo("half", login="AKIA-ID"))
    s = SecretResolver(environ={}, get_connection=conns)
    resolve_store_access(StoreConfig("s3://b", credentials=StoreCredentials(airflow_conn="aws")), s)
    assert s.redact("AKIA-ID / wJalr-secret / sess-tok") == "*** / *** / ***"
    with pytest.raises(SecretError, match="^store.credentials: Airflow connection 'half' needs login"):
        resolve_store_access(StoreConfig("s3://b", credentials=StoreCredentials(airflow_conn="half")), s)


def test_real_airflow_env_connection(monkeypatch):
    # Airflow's own secrets backend: AIRFLOW_CONN_<ID> as JSON, read through airflow.sdk.Connection.
    monkeypatch.setenv("AIRFLOW_CONN_REPLAUDIT_TEST_HOOK", json.dumps(
        {"conn_type": "http", "login": "svc", "password": "s3cr3t-token", "extra": {"api_key": "k9"}}))
    monkeypatch.setenv("AIRFLOW_CONN_REPLAUDIT_TEST_BK",
                       json.dumps({"conn_type": "generic", "extra": {"token": "airflow-tok-42"}}))
    resolver = SecretResolver()
    assert resolver.resolve(SecretRef(airflow_conn="replaudit_test_hook")) == "s3cr3t-token"
    assert resolver.resolve(SecretRef(airflow_conn="replaudit_test_hook", field="extra.api_key")) == "k9"
    assert resolver.resolve({"airflow_conn": "replaudit_test_hook", "field": "login"}) == "svc"
    assert resolver.resolve({"airflow_conn": "replaudit_test_bk"}) == "airflow-tok-42"
    assert resolver.connection("replaudit_test_hook").extra == {"api_key": "k9"}
    with pytest.raises(SecretError, match="replaudit_no_such_conn"):
        resolver.resolve(SecretRef(airflow_conn="replaudit_no_such_conn"))
    with pytest.raises(SecretError, match="replaudit_test_missing"):
        resolver.resolve({"airflow_conn": "replaudit_test_missing"})
