# rtrace: every target installs what it needs into .venv (and .venv-e2e-* for the real-client tests).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint unit e2e-envs browser bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	-$(BIN)/rtrace analyze sample_traces/real/tool-output-race.livekit-1.8.8.jsonl
	@echo
	@echo "(exit 1 above means: findings at error severity, as expected for livekit-agents 1.8.8)"

lint: $(STAMP)
	$(BIN)/ruff check rtrace tests bench
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest

test: $(STAMP) lint unit

clean:
	rm -rf $(VENV) .venv-e2e-* .pytest_cache .mypy_cache .ruff_cache
