# The few verbs of the project. Every target installs what it needs first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NODES ?= 3
MODE ?= eventual
RUN_DIR ?= run/local

.PHONY: setup run test test-fast test-slow lint bench clean

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(PY) manage.py migrate --noinput -v 0
	$(PY) manage.py cluster up --nodes $(NODES) --mode $(MODE) --run-dir $(RUN_DIR) --demo --foreground

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
	$(VENV)/bin/mypy remoting raftstore

bench: setup
	$(PY) bench/cores.py

clean:
	rm -rf $(VENV) run .pytest_cache .mypy_cache .ruff_cache
