# Set-up and the two everyday commands. TORCH pins the CPU build available
# offline here; point it elsewhere (e.g. TORCH=torch) for a CUDA machine.
SHELL := /bin/bash
PYTHON ?= python3
TORCH ?= torch==2.13.0
# make test installs every optional integration, so that their tests run too.
EXTRAS ?= test,tensorboard,mlflow,wandb,ctranslate2,align,slurm,hf
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test toy clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
	touch $@

## make demo: the toy comparison of every attention variant and scheduled sampling
## (finished runs are reused: a second `make demo` only reports), then a sample.
demo: $(VENV)/.installed
	$(BIN)/nmt compare recipes/compare-toy.yaml
	head -n 3 data/toy/test.src | $(BIN)/nmt translate runs/compare-toy/runs/global/seed1 \
	    > runs/compare-toy/sample.hyp
	@echo; echo "global attention, three test sentences:"
	@paste -d '\n' <(head -n 3 data/toy/test.src | sed 's/^/src: /') \
	    <(sed 's/^/hyp: /' runs/compare-toy/sample.hyp) \
	    <(head -n 3 data/toy/test.tgt | sed 's/^/ref: /')
	@echo; echo "report, tables and plots: runs/compare-toy/report.md"

## make test: ruff, then the whole test suite.
test: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/pytest

## make toy: regenerate the committed toy corpus.
toy: $(VENV)/.installed
	$(BIN)/nmt data toy data/toy --size 12000 --seed 1

clean:
	rm -rf runs $(VENV)
