# The two front-door commands: `make run` and `make test`. See README.md.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat setup.cfg pyproject.toml | cksum | cut -d' ' -f1)
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: run test bench install clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

## set up, create the schema, print a demo partner's write token, serve on $(HOST):$(PORT)
run: $(STAMP)
	$(VENV)/bin/slipway init
	$(PY) -m app.demo
	$(VENV)/bin/slipway serve --host $(HOST) --port $(PORT)

## run every test; fails when any test fails or when none ran (pytest exit status 5)
test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

## GET /v1/me next to a bare Falcon endpoint, same uvicorn, same load
bench: $(STAMP)
	$(PY) -m bench me

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache slipway.db slipway.db-wal slipway.db-shm .slipway-demo.json
