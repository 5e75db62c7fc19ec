# The two commands a newcomer types: `make demo` and `make test`.
PY      := .venv/bin/python
STAMP   := .venv/.installed

.PHONY: demo test setup pytest lint bench vsix e2e ts-test clean

$(STAMP): pyproject.toml requirements-dev.txt
	python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt -c requirements-dev.txt
	$(PY) -m pip install -q -e . -c requirements-dev.txt
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	.venv/bin/compile-lens check examples/ --no-benchmark; test $$? -le 1

pytest: setup
	$(PY) -m pytest -q

lint: setup
	$(PY) -m ruff check server tests

test: pytest

bench: setup
	$(PY) scripts/bench.py

clean:
	rm -rf .venv build dist
