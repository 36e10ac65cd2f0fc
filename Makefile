# Set-up and the two everyday commands. TORCH pins the CPU build available
# offline here; point it elsewhere (e.g. TORCH=torch) for a CUDA machine.
SHELL := /bin/bash
PYTHON ?= python3
TORCH ?= torch==2.13.0
# Other SentencePiece releases can train another vocabulary from the same recipe and
# data (docs/compare.md): pinned, so that two machines set up here train the same one.
SENTENCEPIECE ?= sentencepiece==0.2.3
# make test installs every optional integration, so that their tests run too.
EXTRAS ?= test,tensorboard,mlflow,wandb,ctranslate2,onnx,align,slurm,hf
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test toy clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# nmt and its dependencies; the optional integrations (EXTRAS) only for make test,
# so that the demo installs less.
$(VENV)/.installed-base: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)" "$(SENTENCEPIECE)"
	$(BIN)/pip install -q -e .
	touch $@

# transformers 4 beside the hf extra's 5, without dependencies (torch and the rest are
# the venv's): the export's tests run the model card's snippet under both.
TRANSFORMERS4 ?= transformers==4.57.1 huggingface_hub==0.36.2 tokenizers==0.22.2

$(VENV)/.installed: $(VENV)/.installed-base
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
	$(BIN)/pip install -q --upgrade --no-deps --target $(VENV)/transformers4 $(TRANSFORMERS4)
	touch $@

## make demo: global against local-monotonic attention on the toy corpus, three
## seeds each, with the significance rule (finished runs are reused: a second
## `make demo` only reports), then one sentence longer than any in training.
DEMO_JOBS ?= 2
demo: $(VENV)/.installed-base
	$(BIN)/nmt compare recipes/compare-toy-demo.yaml --jobs $(DEMO_JOBS)
	@# line 10: an example, picked from the first ten, where global stops early;
	@# the report's length ratios say how typical that is
	@sed -n 10p data/toy/test_long.src > runs/demo/sample.src
	@for v in global local_m; do \
	    $(BIN)/nmt translate runs/demo/runs/$$v/seed1 -i runs/demo/sample.src \
	        -o runs/demo/sample-$$v.hyp 2>runs/demo/sample.log \
	        || { cat runs/demo/sample.log; exit 1; }; done
	@echo; echo "one test_long sentence (longer than any in training), seed 1:"
	@sed 's/^/source:  /' runs/demo/sample.src
	@sed 's/^/global:  /' runs/demo/sample-global.hyp
	@sed 's/^/local_m: /' runs/demo/sample-local_m.hyp
	@sed -n 10p data/toy/test_long.tgt | sed 's/^/reference: /'
	@# a paragraph: three test sentences as one line; as trained the model stops
	@# after the first (translate says so), --split sentences translates all three
	@sed -n 2,4p data/toy/test.src | paste -sd'|' | sed 's/|/. /g; s/$$/./' > runs/demo/paragraph.src
	@$(BIN)/nmt translate runs/demo/runs/global/seed1 -i runs/demo/paragraph.src \
	    -o runs/demo/paragraph.hyp 2>runs/demo/paragraph.log || { cat runs/demo/paragraph.log; exit 1; }
	@$(BIN)/nmt translate runs/demo/runs/global/seed1 -i runs/demo/paragraph.src --split sentences \
	    --split-lang en -o runs/demo/paragraph-split.hyp 2>runs/demo/sample.log || { cat runs/demo/sample.log; exit 1; }
	@echo; echo "three test sentences as one line, global, seed 1:"
	@sed 's/^/source:    /' runs/demo/paragraph.src
	@sed 's/^/as is:     /' runs/demo/paragraph.hyp
	@grep '^warning' runs/demo/paragraph.log | sed 's/^/           /'
	@sed 's/^/--split sentences: /' runs/demo/paragraph-split.hyp
	@sed -n 2,4p data/toy/test.tgt | paste -sd' ' | sed 's/^/reference: /'
	@echo; echo "report, tables and plots: runs/demo/report.md"

## make test: ruff, then the whole test suite. Python keeps its bytecode cache for the
## suite even where PYTHONDONTWRITEBYTECODE is set: each of the many Python processes
## the suite starts would compile nmt's sources again (docs/benchmarks.md, session 77).
test: $(VENV)/.installed
	$(BIN)/ruff check .
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest

## make toy: regenerate the committed toy corpus.
toy: $(VENV)/.installed
	$(BIN)/nmt data toy data/toy --size 12000 --seed 1

clean:
	rm -rf runs $(VENV)
