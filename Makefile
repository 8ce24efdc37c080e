# Two entry points for a fresh machine (Python 3.11 + Java 17): `make audit` and `make test`.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
export AIRFLOW_HOME := $(CURDIR)/.airflow
export AIRFLOW__CORE__DAGS_FOLDER := $(CURDIR)/dags
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export AIRFLOW__CORE__UNIT_TEST_MODE := False
export SPARK_LOCAL_IP := 127.0.0.1
export PYSPARK_PYTHON := $(CURDIR)/$(BIN)/python
export REPLAUDIT_HOME := $(CURDIR)
ESTATE ?= lab/estate.yaml
WORKERS ?= auto

.PHONY: setup audit test bench scorecard deploy-test clean system-deps

## setup: virtualenv + pinned packages + Airflow metadata DB under the repo (never ~/airflow)
setup: $(VENV)/.installed $(AIRFLOW_HOME)/.migrated

$(VENV)/.installed: pyproject.toml
	@command -v java >/dev/null || { echo "Java 17 is required on PATH (Spark)"; exit 1; }
	@java -version 2>&1 | head -1
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

$(AIRFLOW_HOME)/.migrated: $(VENV)/.installed
	mkdir -p $(AIRFLOW_HOME)
	$(BIN)/airflow db migrate > $(AIRFLOW_HOME)/migrate.log 2>&1 || { tail -20 $(AIRFLOW_HOME)/migrate.log; exit 1; }
	touch $@

## system-deps: what pip cannot install: the real servers the tests start (ZooKeeper, Alertmanager, Pushgateway)
## and the headless Chromium that opens the HTML report
system-deps:
	@MISSING=""; \
	[ -f /usr/share/java/zookeeper.jar ] || MISSING="$$MISSING zookeeper"; \
	command -v prometheus-alertmanager >/dev/null || MISSING="$$MISSING prometheus-alertmanager"; \
	command -v prometheus-pushgateway >/dev/null || MISSING="$$MISSING prometheus-pushgateway"; \
	command -v chromium >/dev/null || MISSING="$$MISSING chromium"; \
	command -v chromedriver >/dev/null || MISSING="$$MISSING chromium-driver"; \
	if [ -n "$$MISSING" ]; then \
	  echo "installing Debian$$MISSING (tests start real servers)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$MISSING >/dev/null; \
	fi

## audit: the nightly audit DAG on the built-in lab estate, through Airflow (`airflow dags test`)
audit: setup
	@# exit 1 (violations) and 3 (a source not covered) are audit results, not failures of the job
	$(BIN)/replaudit nightly --estate $(ESTATE) || [ $$? -eq 1 -o $$? -eq 3 ]

## test: lint (ruff: pyflakes, line length, complexity), then every test but the twenty-seed scorecards and the
## standalone-cluster deployment test, on every core (pytest-xdist); `make scorecard` and `make deploy-test` run
## those, CI runs all three
test: setup system-deps
	$(BIN)/ruff check .
	$(BIN)/pytest -n $(WORKERS) --dist worksteal -m "not slow and not deploy"

## deploy-test: the audit job submitted with spark-submit to a real Spark standalone master and worker on loopback
## (tests marked deploy): a minute of four JVMs, for a change to spark_jobs/, the session setup or docker/
deploy-test: setup system-deps
	$(BIN)/pytest -m deploy

## scorecard: the lab scorecards over twenty seeds each (tests marked slow): twenty BookKeeper clusters, twenty
## Pulsar worlds under continuous traffic, twenty Kafka worlds (every scenario of docs/kafka/lab.md, brokers scanned
## 0 to 120 s apart), each audited in one run and checked exact seed by seed. To print one of those scorecards:
## `replaudit demo --estate lab/estate-seeds.yaml` (or estate-pulsar-seeds.yaml, estate-kafka-seeds.yaml)
scorecard: setup system-deps
	$(BIN)/pytest -n $(WORKERS) --dist worksteal -m slow

## bench: benchmarks (not part of test); prints a table, writes bench/results.json
bench: setup system-deps
	$(BIN)/python -m bench.run

clean:
	rm -rf .work .airflow
