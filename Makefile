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
# Local jobs run in a worker that imported torch once (src/ewa/worker.py); EWA_WORKER=0 gives each its own process.
export EWA_WORKER ?= 1
# Local Snakemake runs: no wait for a SLURM controller that is down (profiles/local/no-slurm.conf says why).
LOCAL_RUN := SLURM_CONF=$(CURDIR)/profiles/local/no-slurm.conf

.PHONY: demo test setup real-model dry-run lint report science clean slurm-localhost docker-sandbox vllm-smoke setup-gpu

demo: $(STAMP)
	bash scripts/unlock-if-stale.sh
	$(LOCAL_RUN) $(BIN)/snakemake --profile profiles/local --cores $(CORES)
	$(LOCAL_RUN) $(BIN)/snakemake --profile profiles/local --report results/report.html

# Modules side by side, each whole on one pytest worker, the longest first (tests/conftest.py), one worker
# more than cores: tests that wait on subprocesses, pipelines and SLURM polls leave room for it
# (docs/benchmarks.md). Then the timing-sensitive tests alone. The slowest of each part are listed.
TEST_WORKERS ?= $(shell echo $$(( $(CORES) + 1 )))
test: $(STAMP) real-model
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not serial" --durations=25
	$(BIN)/pytest -q -m serial --durations=5

setup: $(STAMP) real-model

# The published model of the suite and configs/smoke-real-model.yaml, fetched and converted once
# (scripts/real_model.py); the demo does not need it. Offline, its tests fetch it again and fail.
real-model: $(STAMP)
	$(BIN)/python scripts/real_model.py >/dev/null || echo "setup: warning: the real model was not fetched (scripts/real_model.py)" >&2

$(STAMP): pyproject.toml scripts/setup.sh
	bash scripts/setup.sh

dry-run: $(STAMP)
	$(LOCAL_RUN) $(BIN)/snakemake --profile profiles/local -n

lint: $(STAMP)
	$(LOCAL_RUN) $(BIN)/snakemake --lint

report: $(STAMP)
	$(LOCAL_RUN) $(BIN)/snakemake --profile profiles/local --report results/report.html

# The study's claims over the config's science.seeds, and its negative controls (configs/control-NAME.yaml,
# docs/results.md#controls): each one Snakemake run in which every seed is a replicate of the DAG
# (results/seed<N>/), so seeds run side by side under a profile and a killed run resumes; a control runs in
# results/controls/NAME/. First the seeds' registration is checked (docs/registry.yaml, scripts/register.py);
# last scripts/science.py writes the tables and figures into docs/results.md and records the report.
# The study's calibration comes first: every run judges by it (sandbox.calibration), and the controls refuse
# to plan without it. Then the inits, side by side (scripts/science_inits.py): the study's one init
# (science.init_seed), which a control names in science.init_from, and the own init of a control whose
# change is the SFT mix. Then the study and each control.
CONTROLS := same-regimes no-wrong
SCIENCE_SETTINGS := reasoning tools agentic  # configs/science.yaml's sample.settings, the controls' too
science: $(STAMP)
	$(BIN)/python scripts/register.py --check configs/science.yaml $(foreach c,$(CONTROLS),configs/control-$(c).yaml)
	bash scripts/unlock-if-stale.sh
	for c in $(CONTROLS); do \
	  mkdir -p results/controls/$$c && bash scripts/unlock-if-stale.sh results/controls/$$c || exit 1; \
	done
	$(LOCAL_RUN) $(BIN)/snakemake results/calibration.json --profile profiles/local --cores $(CORES) --configfile configs/science.yaml
	$(LOCAL_RUN) $(BIN)/python scripts/science_inits.py --cores $(CORES) .=configs/science.yaml \
	  $(foreach c,$(CONTROLS),results/controls/$(c)=configs/control-$(c).yaml)
	$(LOCAL_RUN) $(BIN)/snakemake science_all --profile profiles/local --cores $(CORES) --configfile configs/science.yaml
	for c in $(CONTROLS); do \
	  $(LOCAL_RUN) $(BIN)/snakemake science_all --profile profiles/local --cores $(CORES) --snakefile $(CURDIR)/Snakefile \
	    --directory results/controls/$$c --configfile $(CURDIR)/configs/control-$$c.yaml || exit 1; \
	done
	$(BIN)/python scripts/science.py --page docs/results.md --registry docs/registry.yaml \
	  $(foreach s,$(SCIENCE_SETTINGS),results/science/mini/$(s)) \
	  $(foreach c,$(CONTROLS),$(foreach s,$(SCIENCE_SETTINGS),--control $(c)=results/controls/$(c)/results/science/mini/$(s)))

clean:
	rm -rf results logs benchmarks/out .snakemake cache

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

# The paper's GPU environment (.venv-gpu: CUDA torch, vLLM, TRL, DeepSpeed from envs/gpu-requirements.txt,
# then ewa without deps), on a cluster node, not in CI or here: tests/test_gpu_install.py resolves the set.
setup-gpu:
	bash scripts/setup-gpu.sh
