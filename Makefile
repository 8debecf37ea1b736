# The README's two commands, `make demo` and `make test`, each do the whole set-up first:
# a virtual environment in .venv/, the package with its dev extras, and the JVM jars in .jars/: the project's
# own helper built by Maven from jvm/src and its dependencies from Maven Central.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
JARS := .jars/.copied

.PHONY: setup jars demo test test-long test-faults bench lint check-defs ci-checks ui ui-test clean

setup: $(INSTALLED) $(JARS)

$(INSTALLED): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

jars: $(JARS)
$(JARS): jvm/pom.xml $(shell find jvm/src -name '*.java')
	rm -rf .jars
	cd jvm && mvn --batch-mode --quiet package dependency:copy-dependencies
	touch $@

demo: setup
	$(BIN)/python -m dv_assets.demo

test: setup lint
	$(BIN)/pytest -m "not slow and not faults"

# Longer randomized DML histories; not part of `make test`.
test-long: setup
	$(BIN)/pytest -m slow

# The scale figures of issue 9, each next to its target (synthetic tables; takes a while); not part of `make test`.
bench: setup
	$(BIN)/python benchmarks/bench.py

# The long fault suite (races for many rounds, forced interleavings at every version); not part of `make test`.
test-faults: setup
	$(BIN)/pytest -m faults

lint: $(INSTALLED) check-defs
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The code location loads (component YAML and definitions), as dg sees it; no Spark is started.
check-defs: $(INSTALLED)
	env -u DAGSTER_HOME $(BIN)/dg check defs

# The asset checks of the newest mirrored version of every table, against the configured catalog
# (CI runs it after `make demo`); exits non-zero when a check fails. See dv_assets/defs/ci_checks.py.
ci-checks: setup
	$(BIN)/python -m dv_assets.defs.ci_checks

# The Dagster UI (`dg dev`, the dg project of pyproject.toml) over the demo's instance (.dagster_home,
# written by `make demo`).
ui: setup
	mkdir -p .dagster_home
	DAGSTER_HOME=$(CURDIR)/.dagster_home $(BIN)/dg dev --host 127.0.0.1 --port 3000

# The UI in headless Chromium (also part of `make test`); screenshot in .screenshots/.
ui-test: setup
	$(BIN)/pytest tests/test_ui_browser.py

clean:
	rm -rf $(VENV) .jars .dvmirror .dagster_home .pytest_cache
