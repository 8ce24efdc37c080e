"""The compose deployment's structure (docker/docker-compose.yml, docker/Dockerfile, docker/estate.yaml): the
Airflow 3 components on LocalExecutor and Postgres, the Spark standalone cluster and MinIO, wired by one estate."""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from audit.config.estate import parse_estate

DOCKER = Path(__file__).resolve().parents[2] / "docker"
AIRFLOW = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")


def _compose() -> dict:
    return yaml.safe_load((DOCKER / "docker-compose.yml").read_text())


def test_services_and_airflow_components():
    services = _compose()["services"]
    assert set(services) == {*AIRFLOW, "airflow-init", "postgres", "spark-master", "spark-worker", "minio",
                             "minio-init"}
    commands = {name: services[name]["command"][:2] for name in AIRFLOW}
    assert commands == {"airflow-apiserver": ["airflow", "api-server"], "airflow-scheduler": ["airflow", "scheduler"],
                        "airflow-dag-processor": ["airflow", "dag-processor"],
                        "airflow-triggerer": ["airflow", "triggerer"]}
    assert services["airflow-init"]["command"] == ["airflow", "db", "migrate"]
    for name in (*AIRFLOW, "airflow-init"):
        env = services[name]["environment"]
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor", name
        db = urlsplit(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].replace("${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}",
                                                                         "x"))
        assert (db.scheme, db.hostname, db.port, db.path) == ("postgresql+psycopg2", "postgres", 5432, "/airflow")
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-apiserver:8080/execution/"
        assert services[name]["image"] == "replaudit:latest"
    for name in AIRFLOW:
        deps = services[name]["depends_on"]
        assert deps["airflow-init"]["condition"] == "service_completed_successfully"
        assert deps["postgres"]["condition"] == "service_healthy"


def test_secrets_are_variables_never_values():
    text = (DOCKER / "docker-compose.yml").read_text()
    for key in ("POSTGRES_PASSWORD", "AWS_SECRET_ACCESS_KEY", "AIRFLOW__API_AUTH__JWT_SECRET", "MINIO_ROOT_PASSWORD"):
        for value in re.findall(rf"{key}: (\S+)", text):
            assert value.startswith("${"), (key, value)


def test_one_estate_wires_store_spark_and_staging():
    compose = _compose()
    services = compose["services"]
    estate = parse_estate((DOCKER / "estate.yaml").read_text())
    assert services["airflow-scheduler"]["environment"]["REPLAUDIT_ESTATE"] == "/estate/estate.yaml"
    assert any(v.endswith(":/estate:ro") for v in services["airflow-scheduler"]["volumes"])
    master = urlsplit(estate.spark.master)
    assert (master.scheme, master.hostname, master.port) == ("spark", "spark-master", 7077)
    assert "--port 7077" in services["spark-master"]["command"][-1]
    assert "spark://spark-master:7077" in services["spark-worker"]["command"][-1]
    store = urlsplit(estate.store.endpoint_url)
    assert (store.hostname, store.port) == ("minio", 9000)
    bucket = urlsplit(estate.store.uri).hostname
    assert f"store/{bucket}" in services["minio-init"]["entrypoint"][-1]
    # Spark reads and writes the stages' local folders: the same volume on the Airflow side and on the worker
    work = "replaudit-work:/opt/replaudit/.work"
    assert all(work in services[name]["volumes"] for name in (*AIRFLOW, "spark-worker"))
    assert "replaudit-work" in compose["volumes"]
    refs = {r.env for r in (estate.store.credentials.access_key, estate.store.credentials.secret_key)}
    assert refs <= set(services["airflow-scheduler"]["environment"]) and refs <= set(
        services["spark-worker"]["environment"])


def test_dockerfile_copies_what_exists():
    text = (DOCKER / "Dockerfile").read_text()
    root = DOCKER.parent
    for src in re.findall(r"^COPY (.+?) \S+$", text, re.M):
        for part in src.split():
            assert (root / part).exists(), part
    assert "openjdk-17" in text and "psycopg2" in text
