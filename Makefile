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

.PHONY: demo test setup dry-run lint report science clean slurm-localhost docker-sandbox vllm-smoke

demo: $(STAMP)
	bash scripts/unlock-if-stale.sh
	$(BIN)/snakemake --profile profiles/local --cores $(CORES)
	$(BIN)/snakemake --profile profiles/local --report results/report.html

test: $(STAMP)
	$(BIN)/pytest -q

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh
	bash scripts/setup.sh

dry-run: $(STAMP)
	$(BIN)/snakemake --profile profiles/local -n

lint: $(STAMP)
	$(BIN)/snakemake --lint

report: $(STAMP)
	$(BIN)/snakemake --profile profiles/local --report results/report.html

# The study's claims with a seed-to-seed spread: the demo (seed 0, here) plus one run per extra seed
# under runs/seed<N>/, then scripts/science.py rewrites the README's results section from them.
SEEDS ?= 1 2 3 4  # five seeds in all, about an hour on 2 cores
science: demo
	for s in $(SEEDS); do \
	  mkdir -p runs/seed$$s && bash scripts/unlock-if-stale.sh runs/seed$$s && \
	  $(BIN)/snakemake --profile profiles/local --cores $(CORES) --snakefile Snakefile \
	    --directory runs/seed$$s --configfile $(CURDIR)/config.yaml --config seed=$$s || exit 1; \
	done
	$(BIN)/python scripts/science.py . $(addprefix runs/seed,$(SEEDS))

clean:
	rm -rf results logs benchmarks/out .snakemake runs

# A one-node SLURM cluster on this machine (root; apt slurm-wlm + munge) for profiles/slurm-localhost
# and tests/test_slurm.py; `scripts/slurm-localhost.sh stop` stops it.
slurm-localhost:
	bash scripts/slurm-localhost.sh

# The image of sandbox.backend: docker, built locally without a registry (root; apt docker.io).
docker-sandbox:
	bash scripts/docker-sandbox-image.sh

# The vLLM backend for real, on the CPU: its own venv (.venv-vllm, pins transformers<5.20), then the
# tiny model through it.
vllm-smoke: $(STAMP)
	bash scripts/setup-vllm.sh
	$(BIN)/pytest -q -m vllm tests/test_sample.py
