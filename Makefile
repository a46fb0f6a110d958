# The two commands a newcomer needs: `make demo` (the miniature, end to end) and `make test`.
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.ewa-installed
CORES ?= 2
export PATH := $(abspath $(BIN)):$(PATH)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: demo test setup dry-run lint report clean

demo: $(STAMP)
	$(BIN)/snakemake --profile profiles/default --cores $(CORES)

test: $(STAMP)
	$(BIN)/pytest -q

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh
	bash scripts/setup.sh

dry-run: $(STAMP)
	$(BIN)/snakemake --profile profiles/default -n

lint: $(STAMP)
	$(BIN)/snakemake --lint

report: $(STAMP)
	$(BIN)/snakemake --profile profiles/default --report results/report.html

clean:
	rm -rf results logs benchmarks/out .snakemake
