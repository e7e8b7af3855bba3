# One task runner for the README, CI and developers.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint format bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,tiktoken,embeddings]' -c constraints.txt
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m ctxnb.demo

test: $(STAMP)
	$(BIN)/ruff check --output-format concise .
	$(BIN)/ruff format --check .
	$(BIN)/mypy ctxnb
	$(BIN)/pytest -p no:cacheprovider --nbval --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg notebooks/
	$(BIN)/pytest -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	for b in bench/*.py; do case $$b in */_*) ;; *) echo "== $$b"; $(BIN)/python $$b || exit 1;; esac; done

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
