# The two commands a newcomer types: `make demo` and `make test`.
PY        := .venv/bin/python
STAMP     := .venv/.installed
NPM_STAMP := node_modules/.package-lock.json

.PHONY: demo test setup redis-server pytest lint docs bench vsix e2e screenshots ts-test gpu-check wheels clean

# Set-up: a venv with the project (editable), the test tools and torch pinned to the CPU build on
# this disk; requirements-dev.txt doubles as the constraints file so nothing picks a newer torch.
# uv installs, from where pip's configuration says (scripts/uv_args.py), and writes the bytecode as
# pip does (without it each process compiled torch's modules again: 13 s to import torch, not 5 s,
# where PYTHONDONTWRITEBYTECODE is set).
UV_VERSION := 0.13.10
$(STAMP): pyproject.toml requirements-dev.txt requirements-reference.txt
	python3 -m venv .venv
	$(PY) -m pip install -q uv==$(UV_VERSION)
	$(eval UV := .venv/bin/uv pip install -q --compile-bytecode --python $(PY) $(shell python3 scripts/uv_args.py))
	$(UV) -r requirements-dev.txt -c requirements-dev.txt
	$(UV) --no-deps -r requirements-reference.txt
	$(UV) -e . -c requirements-dev.txt
	touch $(STAMP)

$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error

# Redis for the remote-cache tests (a real server, started and stopped by tests/conftest.py's
# redis_url): apt-get when missing (CI runs as root on Debian); elsewhere, say what to run
REDIS := $(shell command -v redis-server)
redis-server:
ifeq ($(REDIS),)
	@if [ "$$(id -u)" != 0 ]; then echo "redis-server is missing (the remote-cache tests start a real one): run sudo apt-get install redis-server, then make setup" >&2; exit 1; fi
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends redis-server
endif

setup: $(STAMP) redis-server

demo: setup
	.venv/bin/compile-lens check examples/; test $$? -le 1

# pytest on PYTEST_WORKERS processes (pytest-xdist; tests/conftest.py keeps each module, and the
# modules that share a session fixture, on one of them so shared fixtures are built once, heaviest
# first), its slowest tests printed and
# its JUnit XML kept for the ledger (scripts/suite_ledger.py, BENCHMARKS.md). PYTEST_WORKERS=0: one process.
# Tests marked `alone` (they assert on their own timing figures) run after, in one process.
PYTEST_WORKERS ?= 2
# Our own files' bytecode first, once: where PYTHONDONTWRITEBYTECODE is set, every process the suite
# starts (servers, workers, CLIs, cold children) compiled them again (0.1-0.5 s each).
pytest: setup
	@mkdir -p build
	@$(PY) -m compileall -q server tests benchmarks
	$(PY) -m pytest -q -m "not alone" -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=20 --junitxml=build/pytest.xml
	$(PY) -m pytest -q -m alone --durations=10 --junitxml=build/pytest-alone.xml
	@$(PY) scripts/suite_ledger.py build/pytest.xml build/pytest-alone.xml --top 20

lint: setup
	$(PY) -m ruff check server tests scripts benchmarks

# The docs site (mkdocs.yml, docs/): strict, so a broken link or anchor fails the build. No -q: it
# would hide the warnings strict mode counts.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir build/site

ts-test: $(NPM_STAMP)
	npm test --silent

vsix: $(STAMP) $(NPM_STAMP)
	bash scripts/e2e/vsix.sh

e2e: $(STAMP) $(NPM_STAMP)
	bash scripts/e2e/run.sh

# the README's and the docs' pictures from the last e2e run
screenshots:
	bash scripts/e2e/screenshots.sh

# each stage's time and the total are printed at the end (the budget: 20 minutes on CI's 2 cores)
test:
	@bash scripts/test_stages.sh lint,ts-test docs pytest,e2e

# The benchmark harness (benchmarks/): every unit for the device, one JSON line each (its typed
# figures: value, unit, goal; the machine's load) in build/bench/ledger.jsonl, BENCHMARKS.md's
# generated blocks rewritten from it. BENCH=NAME… picks units, BENCH_FLAGS=--quick runs each smaller
# (--dry: the rehearsal; --render: only rewrite BENCHMARKS.md), `--list` names them all.
BENCH_DEVICE ?= cpu
bench: setup
	PYTHONPATH=server $(PY) -m benchmarks $(BENCH) --device $(BENCH_DEVICE) $(BENCH_FLAGS) --markdown

# On a GPU box: capture, the device's tests, the busy rule, max-autotune: 5 minutes with the wheels'
# install, to fit a 15-minute lent slot twice (scripts/gpu-check [OUT] [UNIT...]; docs/remote.md).
gpu-check:
	scripts/gpu-check

# The pure-Python wheels a GPU box lacks (pygls, lsprotocol, cattrs, attrs), from this venv: build/wheels
wheels: setup
	$(PY) scripts/wheels.py build/wheels

clean:
	rm -rf .venv build dist bundled extension/out node_modules
