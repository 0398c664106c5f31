# Two commands do all set-up: `make dev` runs Leasehold locally, `make test` runs every test.
# Each creates the virtualenv (.venv) and installs what it needs on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
PYTEST_WORKERS ?= 2
# `make dev PORT=9000 ARGS="--workers 4 --fresh"`: the API port and any other `leasehold dev`
# options (`leasehold dev --help` lists them).
PORT ?= 8080
ARGS ?=

.PHONY: dev test lint typecheck unit soak chromium bench bench-quick synth clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Leasehold needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,infra]'
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

dev: $(STAMP)
	$(VENV)/bin/leasehold dev --port $(PORT) $(ARGS)

test: $(STAMP) lint typecheck chromium
	JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1 $(PY) -m pytest -n $(PYTEST_WORKERS) \
		--durations=15 tests

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

unit: $(STAMP)
	$(PY) -m pytest -q tests/unit

# The fault-injecting state machine with a larger budget than `make test` gives it
# (SOAK_EXAMPLES examples of SOAK_STEPS steps; about 15 s per example on 2 cores).
SOAK_EXAMPLES ?= 200
SOAK_STEPS ?= 40
soak: $(STAMP)
	LEASEHOLD_SOAK_EXAMPLES=$(SOAK_EXAMPLES) LEASEHOLD_SOAK_STEPS=$(SOAK_STEPS) \
		$(PY) -m pytest -p no:cacheprovider -q -o timeout=0 tests/integration/test_stateful.py

clean:
	rm -rf $(VENV) cdk.out .pytest_cache .mypy_cache .ruff_cache .hypothesis

# Synthesizes the CDK app into cdk.out (real pip bundling, cdk-nag checks) with the CDK CLI
# fetched by npx; `make synth ARGS="-c alarmEmail=ops@example.com"` passes context.
synth: $(STAMP)
	JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1 npx --yes aws-cdk@2 synth --quiet $(ARGS)

# Benchmarks against the local runtime (issue 7): write bench/results.json and BENCHMARKS.md.
# `bench` takes up to 15 minutes on 2 cores; `bench-quick` is a reduced run under 2 minutes.
bench: $(STAMP)
	JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1 $(PY) -m bench.run

bench-quick: $(STAMP)
	$(PY) -m bench.run --quick
