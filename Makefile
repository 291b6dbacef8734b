# `make run` needs only Python 3 and make (the first target run creates .venv); `make test`
# also installs npm packages, redis-server, prometheus and haproxy (apt-get) and Arize Phoenix (README.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
NODE_STAMP := tests/node/node_modules/.installed-stamp
AUTH_STAMP := tests/authserver/node_modules/.installed-stamp
DOWNSTREAM_STAMP := tests/downstream/node/node_modules/.installed-stamp

.PHONY: run test check test-deps backends e2e fleet soak package lint typecheck contracts docs docs-strict pytest conformance bench bench-quick format clean fastapi-range anyio-floor

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,example,docs]'
	touch $(STAMP)

# The example's telemetry is configured by opentelemetry-instrument from the standard OTEL_*
# variables; unset, spans go to the console and nothing else is exported, and with an OTLP
# endpoint traces and metrics go there (OTLP/HTTP). Any OTEL_* variable you set wins.
run: $(STAMP)  ## serve the example FastAPI app on http://127.0.0.1:8000 (MCP at /mcp)
	@otlp="$${OTEL_EXPORTER_OTLP_ENDPOINT}$${OTEL_EXPORTER_OTLP_TRACES_ENDPOINT}"; \
	traces=console; metrics=none; if [ -n "$$otlp" ]; then traces=otlp; metrics=otlp; fi; \
	export OTEL_SERVICE_NAME="$${OTEL_SERVICE_NAME:-library}" \
		OTEL_TRACES_EXPORTER="$${OTEL_TRACES_EXPORTER:-$$traces}" \
		OTEL_METRICS_EXPORTER="$${OTEL_METRICS_EXPORTER:-$$metrics}" \
		OTEL_LOGS_EXPORTER="$${OTEL_LOGS_EXPORTER:-none}" \
		OTEL_EXPORTER_OTLP_PROTOCOL="$${OTEL_EXPORTER_OTLP_PROTOCOL:-http/protobuf}"; \
	exec $(BIN)/opentelemetry-instrument $(BIN)/uvicorn examples.fastapi_app.main:app \
		--host 127.0.0.1 --port 8000 --timeout-graceful-shutdown 5

test: lint typecheck contracts docs-strict package pytest fastapi-range anyio-floor  ## the full suite: ruff, mypy --strict, import contracts, the docs site, the package (build, twine check), pytest, the FastAPI matrix, anyio's floor

check: lint typecheck contracts  ## the fast loop: ruff, mypy --strict, import contracts and the tests that start nothing (no server, node or backend)
	$(BIN)/python -m pytest -q -m "not live" -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check mcp_asgi tests examples bench
	$(BIN)/ruff format --check mcp_asgi tests examples bench

typecheck: $(STAMP)
	$(BIN)/mypy

contracts: $(STAMP)  ## the layers and import rules in pyproject.toml [tool.importlinter]
	$(BIN)/lint-imports

docs: $(STAMP)  ## the documentation site with the API reference, into site/ (no network needed)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build

docs-strict: $(STAMP)  ## the same build, failing on any warning (a broken link, a reference to a moved name)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

test-deps:  ## system packages the tests need: redis-server (the Redis bus tests), prometheus and its promtool (tests/backends), haproxy (tests/fleet)
	command -v redis-server >/dev/null || (apt-get update && apt-get install -y redis-server)
	command -v haproxy >/dev/null || test -x /usr/sbin/haproxy || (apt-get update && apt-get install -y haproxy)
	(command -v prometheus && command -v promtool) >/dev/null || (apt-get update && apt-get install -y prometheus)

# Arize Phoenix, the trace backend of tests/backends, in a venv of its own (its pins must
# not move the project's packages), installed once into the git-ignored .backends/
PHOENIX_VERSION := 20.26.1
PHOENIX_STAMP := .backends/phoenix/.installed-$(PHOENIX_VERSION)

$(PHOENIX_STAMP):
	rm -rf .backends/phoenix
	$(PYTHON) -m venv .backends/phoenix
	.backends/phoenix/bin/python -m pip install --quiet 'arize-phoenix==$(PHOENIX_VERSION)'
	touch $@

backends: test-deps $(PHOENIX_STAMP)  ## the telemetry backends of tests/backends: Prometheus (apt), Arize Phoenix (PyPI)

e2e: $(STAMP) backends  ## only the real-backend telemetry tests (tests/backends; make test runs them too)
	MCP_ASGI_BACKENDS=required $(BIN)/python -m pytest tests/backends

FLEET_ROUNDS ?= 5
fleet: $(STAMP) test-deps $(NODE_STAMP)  ## the rolling-restart rig of tests/fleet, longer: FLEET_ROUNDS rolling restarts under load, figures in fleet-report.json (make test runs one)
	FLEET_ROUNDS=$(FLEET_ROUNDS) FLEET_REPORT=fleet-report.json $(BIN)/python -m pytest -q -s tests/fleet

SOAK_SECONDS ?= 3600
soak: $(STAMP) test-deps  ## the soak of tests/soak, longer: SOAK_SECONDS (an hour) of mixed load on one replica, failing on growth; samples in soak-report.json, their plot in docs/img/soak.svg (make test runs 2 minutes)
	SOAK_SECONDS=$(SOAK_SECONDS) SOAK_REPORT=soak-report.json $(BIN)/python -m pytest -q -s tests/soak/test_soak.py
	$(BIN)/python -m bench.soak_plot soak-report.json --svg docs/img/soak.svg

package: $(STAMP)  ## build the wheel and the sdist into dist/ and check them with twine
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

# tests/node from its lockfile: the TypeScript SDK clients (interop tests), the official
# conformance suite (0.2.x, and 0.1.x as conformance-2025) and the Node 22 binary it needs
$(NODE_STAMP): tests/node/package.json tests/node/package-lock.json
	npm ci --prefix tests/node --no-audit --no-fund
	touch $(NODE_STAMP)

# tests/authserver from its lockfile: oidc-provider, the authorization server of tests/auth
$(AUTH_STAMP): tests/authserver/package.json tests/authserver/package-lock.json
	npm ci --prefix tests/authserver --no-audit --no-fund
	touch $(AUTH_STAMP)

# tests/downstream/node from its lockfile: @modelcontextprotocol/server-everything, the
# reference server tests/downstream mounts and cancels through mcp_asgi
$(DOWNSTREAM_STAMP): tests/downstream/node/package.json tests/downstream/node/package-lock.json
	npm ci --prefix tests/downstream/node --no-audit --no-fund
	touch $(DOWNSTREAM_STAMP)

pytest: $(STAMP) test-deps $(NODE_STAMP) $(AUTH_STAMP) $(DOWNSTREAM_STAMP) $(PHOENIX_STAMP)
	MCP_ASGI_BACKENDS=required $(BIN)/python -m pytest

conformance: $(STAMP) $(NODE_STAMP)  ## only the official MCP conformance suite (tests/conformance)
	$(BIN)/python -m pytest tests/conformance

# FastAPI's dependency solver is internal API (mcp_asgi/server/depends.py, Solver): the
# handler-API tests run with the oldest, a middle and the newest tested FastAPI. Each
# version is a folder of wheels installed once with --no-deps into the git-ignored
# .venv-fastapi/<version> and put before .venv on PYTHONPATH: only FastAPI and what
# FASTAPI_<version>_WITH names (its Starlette, and for the oldest the floors of pydantic
# and pydantic-settings) differ from .venv, so no venv is created and a run costs only the
# tests. Between them they take every path of depends.Solver (a tuple or SolvedDependency
# result; yield dependencies on the scope's fastapi_astack, on async_exit_stack, on the
# scope's stacks of 0.121+) and both Starlette root_path conventions under a mount (< 0.33,
# >= 0.35). The newest is depends.py's
# NEWEST_TESTED_FASTAPI (tests/server/test_depends.py checks they agree); when .venv has
# that same FastAPI, `make pytest` runs these tests with it already.
FASTAPI_VERSIONS ?= 0.100.0 0.112.2 0.165.0
FASTAPI_0.100.0_WITH := starlette==0.27.0 sse-starlette==3.0.3 \
	pydantic==2.7.3 pydantic-core==2.18.4 pydantic-settings==2.7.0
FASTAPI_0.112.2_WITH := starlette==0.38.6 sse-starlette==3.0.3
# Starlette < 0.41 imports python-multipart by its old name, and FastAPI < 0.103 calls a
# pydantic-core function the 2.18 core deprecates: both warn (an error here)
HANDLER_PYTEST := -q -p no:cacheprovider \
	-W 'ignore:Please use `import python_multipart`:PendingDeprecationWarning' \
	-W 'ignore:`general_plain_validator_function` is deprecated:DeprecationWarning'
# The handler API, and what else meets Starlette or pydantic at their floors: the host
# app's routes as tools (under a mount's root_path), the JSON-RPC body's strings
HANDLER_TESTS := tests/server/test_depends.py tests/server/test_request.py \
	tests/server/test_error_status.py tests/e2e/test_live_depends.py \
	tests/routes/test_routes.py tests/protocol/test_json_strings.py

.venv-fastapi/%/.installed: | $(STAMP)
	rm -rf .venv-fastapi/$*
	$(BIN)/python -m pip install --quiet --no-deps --target .venv-fastapi/$* \
		'fastapi==$*' $(FASTAPI_$*_WITH)
	touch $@

fastapi-range: $(FASTAPI_VERSIONS:%=.venv-fastapi/%/.installed)  ## the handler-API tests with each of FASTAPI_VERSIONS (in make test)
	@venv=$$($(BIN)/python -c 'import fastapi; print(fastapi.__version__)'); \
	for v in $(FASTAPI_VERSIONS); do \
		if [ "$$v" = "$$venv" ]; then echo "== FastAPI $$v: .venv's, tested by make pytest"; continue; fi; \
		echo "== FastAPI $$v"; \
		PYTHONPATH=.venv-fastapi/$$v $(BIN)/python -m pytest $(HANDLER_PYTEST) \
			$(HANDLER_TESTS) || exit 1; \
	done

# mcp_asgi/_loop copies anyio's asyncio backend as of the floor in pyproject.toml
# (_loop/anyio_fit.py's WRITTEN_FOR): when .venv has resolved a newer anyio, the loop and
# lifecycle tests also run with the floor, installed --no-deps into the git-ignored
# .venv-anyio/<version> and put before .venv on PYTHONPATH (as fastapi-range does)
ANYIO_FLOOR := $(shell sed -n 's/^ *"anyio>=\([0-9.]*\),.*/\1/p' pyproject.toml)

.venv-anyio/%/.installed: | $(STAMP)
	rm -rf .venv-anyio/$*
	$(BIN)/python -m pip install --quiet --no-deps --target .venv-anyio/$* 'anyio==$*'
	touch $@

anyio-floor: $(STAMP)  ## the loop and lifecycle tests with anyio's floor, if .venv has a newer anyio (in make test)
	@if $(BIN)/python -c 'import sys, importlib.metadata as m; from packaging.version import Version as V; \
		sys.exit(V(m.version("anyio")) != V(sys.argv[1]))' '$(ANYIO_FLOOR)'; then \
		echo "== anyio $(ANYIO_FLOOR): .venv's, tested by make pytest"; \
	else \
		$(MAKE) --no-print-directory .venv-anyio/$(ANYIO_FLOOR)/.installed && \
		echo "== anyio $(ANYIO_FLOOR)" && \
		PYTHONPATH=.venv-anyio/$(ANYIO_FLOOR) $(BIN)/python -m pytest -q -p no:cacheprovider \
			tests/loop tests/lifecycle; \
	fi

format: $(STAMP)
	$(BIN)/ruff format mcp_asgi tests examples bench
	$(BIN)/ruff check --fix mcp_asgi tests examples bench

bench: $(STAMP) $(DOWNSTREAM_STAMP)  ## the full benchmark run (long): the peers, then every server with its floor
	$(BIN)/python -m bench.run --rounds 3
	$(BIN)/python -m bench.stacks --rounds 3
	$(BIN)/python -m bench.cancel_latency --servers all
	$(BIN)/python -m bench.tasks
	$(BIN)/python -m bench.downstream
	$(BIN)/python -m bench.instructions --write
	$(BIN)/python -m bench.server_counts --write
	$(BIN)/python -m bench.compiled --write
	$(BIN)/python -m bench.cancel_counts --http h11,httptools --write
	$(BIN)/python -m bench.cancel_latency --servers uvicorn-h11,uvicorn-httptools --kinds async --mass 0 --samples 1 --rounds 30
	$(BIN)/python -m bench.cancel_latency --servers uvicorn-h11,uvicorn-httptools --kinds async --mass 0 --burst 0 --no-floor --samples 40 --rounds 3
	$(BIN)/python -m bench.run --targets mcp_asgi,sdk-sse --figures mass --streams 300 --rounds 15
	$(BIN)/python -m bench.goals --write

bench-quick: $(STAMP) $(DOWNSTREAM_STAMP)  ## a few minutes
	$(BIN)/python -m bench.run --quick
	$(BIN)/python -m bench.stacks --quick
	$(BIN)/python -m bench.cancel_latency --quick --servers all
	$(BIN)/python -m bench.tasks --quick
	$(BIN)/python -m bench.downstream --quick
	$(BIN)/python -m bench.instructions --cases floor,async,def,cancelled

clean:
	rm -rf $(VENV) site .mypy_cache .pytest_cache .ruff_cache tests/node/node_modules tests/authserver/node_modules tests/downstream/node/node_modules .venv-anyio
