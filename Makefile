# The README's two commands, `make demo` and `make test`, each do the whole set-up first:
# a virtual environment in .venv/, the package with its dev extras, and the JVM jars in .jars/: the project's
# own helper built by Maven from jvm/src and its dependencies from Maven Central.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
JARS := .jars/.copied
JARS_S3 := .jars/s3/.copied
REST_CATALOG := .jars/rest-catalog/.copied

.PHONY: setup jars jars-s3 demo test test-long test-faults test-integration bench lint ui ui-test clean

setup: $(INSTALLED) $(JARS)

$(INSTALLED): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

jars: $(JARS)
$(JARS): jvm/pom.xml $(shell find jvm/src -name '*.java')
	mkdir -p .jars && rm -f .jars/*.jar
	cd jvm && mvn --batch-mode --quiet package dependency:copy-dependencies
	touch $@

# S3 for Spark (S3A + AWS SDK, Iceberg's AWS bundle; ~700 MB), in .jars/s3/: loaded only when needed.
jars-s3: $(JARS_S3)
$(JARS_S3): jvm/s3/pom.xml
	rm -rf .jars/s3
	cd jvm/s3 && mvn --batch-mode --quiet dependency:copy-dependencies
	touch $@

# Iceberg's REST catalog test server (integration tests only), in .jars/rest-catalog/.
$(REST_CATALOG): jvm/rest-catalog/pom.xml
	rm -rf .jars/rest-catalog
	cd jvm/rest-catalog && mvn --batch-mode --quiet dependency:copy-dependencies
	touch $@

demo: setup
	$(BIN)/python -m dv_assets.demo

test: setup lint
	$(BIN)/pytest -m "not slow and not faults and not integration"

# Real servers started by the tests (tests/integration): Iceberg's REST catalog, PostgreSQL (Debian's
# package, installed here when missing) as a JDBC catalog, and moto's S3 server on loopback.
test-integration: setup $(JARS_S3) $(REST_CATALOG)
	command -v pg_ctl >/dev/null || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 \
	  || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql)
	$(BIN)/pytest -m integration tests/integration

# Longer randomized DML histories; not part of `make test`.
test-long: setup
	$(BIN)/pytest -m slow

# The scale figures of issue 9, each next to its target (synthetic tables; takes a while); not part of `make test`.
bench: setup
	$(BIN)/python benchmarks/bench.py

# The long fault suite (races for many rounds, forced interleavings at every version); not part of `make test`.
test-faults: setup
	$(BIN)/pytest -m faults

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The Dagster UI over the demo's instance (.dagster_home, written by `make demo`) and workspace.yaml.
ui: setup
	mkdir -p .dagster_home
	DAGSTER_HOME=$(CURDIR)/.dagster_home $(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

# The UI in headless Chromium (also part of `make test`); screenshot in .screenshots/.
ui-test: setup
	$(BIN)/pytest tests/test_ui_browser.py

clean:
	rm -rf $(VENV) .jars .dvmirror .dagster_home .pytest_cache
