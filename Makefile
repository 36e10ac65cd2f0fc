# Set-up and the two everyday commands. TORCH pins the CPU build available
# offline here; point it elsewhere (e.g. TORCH=torch) for a CUDA machine.
SHELL := /bin/bash
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test toy bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e '.[test]'
	touch $@

## make demo: train the toy recipe, then translate and score toy sentences.
demo: $(VENV)/.installed
	rm -rf runs/demo
	$(BIN)/nmt train recipes/toy.yaml --set run_dir=runs/demo
	head -n 5 data/toy/test.src | $(BIN)/nmt translate runs/demo > runs/demo/sample.hyp
	paste -d '\n' <(head -n 5 data/toy/test.src | sed 's/^/src: /') \
	    <(sed 's/^/hyp: /' runs/demo/sample.hyp) <(head -n 5 data/toy/test.tgt | sed 's/^/ref: /')
	@echo; cat runs/demo/results.json

## make test: ruff, then the whole test suite.
test: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/pytest

## make toy: regenerate the committed toy corpus.
toy: $(VENV)/.installed
	$(BIN)/nmt data toy data/toy --size 12000 --seed 1

clean:
	rm -rf runs $(VENV)
