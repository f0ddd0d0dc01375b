# Fresh machine -> working environment. torch is pinned to the CPU wheel first so that
# nothing later pulls a multi-GB CUDA build; GPU users install their own torch first.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= dev,gym,math,code,tensorboard,wandb,mlflow,trackio,bench,lora,ray

.PHONY: install quickstart test test-all lint clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

install: $(VENV)/.installed

quickstart: install
	$(BIN)/rlvr quickstart

test: install
	$(BIN)/python -m pytest -q

test-all: install
	$(BIN)/python -m pytest -q -m "slow or not slow"

lint: install
	$(BIN)/ruff check rlvr tests benchmarks

clean:
	rm -rf $(VENV) runs
