#!/usr/bin/env bash
# The GPU environment (.venv-gpu) for the paper configs on a SLURM cluster: envs/gpu-requirements.txt
# (CUDA torch, vLLM, TRL, DeepSpeed, ...), then ewa itself without dependencies (pyproject.toml pins the
# CPU set, which this venv must not resolve). `make setup-gpu` runs it.
#
# Where: a cluster node with the shared filesystem the pipeline runs from, best a GPU node, e.g.
#   srun -p gpu --gpus 1 -c 8 --mem 32G -t 60 --pty make setup-gpu
# A login node works too (nothing here needs a GPU), but only a GPU node checks the driver.
# Not for CI or the CPU development machines: there tests/test_gpu_install.py proves the set resolves.
# Needs Linux x86_64, CPython 3.11, glibc >= 2.31 (vLLM's llguidance wheels), NVIDIA driver >= 580 (torch
# 2.13.0 from the package index is a CUDA 13.0 build). ~10 GB on disk, a few minutes.
#
# DeepSpeed (ZeRO-3 in configs/accelerate/zero3.yaml) exists only as source. It is built here against the
# venv's torch (--no-build-isolation, so it records that torch and not a throwaway one) with
# DS_BUILD_OPS=0: nothing is compiled now, and each op it needs (fused Adam, CPU Adam for offload, ...)
# compiles just in time on first use, once, into ~/.cache/torch_extensions. That JIT build needs, on the
# GPU node: a CUDA toolkit whose nvcc is exactly CUDA 13.0 like torch (e.g. `module load cuda/13.0`, which
# sets CUDA_HOME; DeepSpeed refuses another minor version unless DS_SKIP_CUDA_CHECK=1), a C++ compiler, and
# TORCH_CUDA_ARCH_LIST=9.0 for H100. To compile ops now instead, rerun on a GPU node with the toolkit
# loaded and e.g. DS_BUILD_FUSED_ADAM=1 DS_BUILD_CPU_ADAM=1 (DS_BUILD_OPS=1 builds all of them: slow).
# `.venv-gpu/bin/ds_report` shows what is compiled and what can be.
#
# Use: `source .venv-gpu/bin/activate`, then `snakemake --profile profiles/slurm --configfile ...`: the
# jobs inherit the venv. Idempotent: rerunning reinstalls nothing that is already at its pin.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${GPU_VENV:-.venv-gpu}
PYTHON=${PYTHON:-python3.11}
REQS=envs/gpu-requirements.txt
say() { echo "setup-gpu: $*" >&2; }

if [ "${CI:-}" = true ]; then
  say "not in CI: this installs ~10 GB of CUDA packages for a GPU node (tests/test_gpu_install.py checks the set)"
  exit 1
fi
[ "$(uname -s)/$(uname -m)" = Linux/x86_64 ] || { say "needs Linux x86_64 (this is $(uname -s)/$(uname -m))"; exit 1; }
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' 2>/dev/null \
  || { say "needs CPython 3.11: set PYTHON=/path/to/python3.11 (e.g. after \`module load python/3.11\`)"; exit 1; }
glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
"$PYTHON" -c "import sys; sys.exit(tuple(map(int, '$glibc'.split('.'))) < (2, 31))" \
  || { say "glibc $glibc is older than 2.31: vLLM's dependencies have no wheels for it"; exit 1; }
if command -v nvidia-smi >/dev/null && driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1) \
   && [ -n "$driver" ]; then
  if [ "${driver%%.*}" -lt 580 ] && [ "${EWA_SKIP_DRIVER_CHECK:-0}" != 1 ]; then
    say "NVIDIA driver $driver is older than 580, which CUDA 13.0 (torch 2.13.0's build) needs."
    say "Ask for a newer driver, or set EWA_SKIP_DRIVER_CHECK=1 if your site provides CUDA forward compatibility (cuda-compat)."
    exit 1
  fi
  say "GPU node: driver $driver"
else
  say "no GPU visible here: installing anyway (run the driver check with nvidia-smi on a GPU node)"
fi

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip)
"${PIP[@]}" install -q --upgrade pip setuptools
# torch first and alone, so DeepSpeed's build below sees it. `===` in the file keeps any `+cpu` build out.
"${PIP[@]}" install -q "$(grep -E '^torch[=<>!~ ]' "$REQS")"
# DeepSpeed built against that torch, every time (a few seconds without ops): not from pip's wheel cache,
# which may hold a build made beside another torch or none, and records it. DS_ACCELERATOR=cuda because a
# login node has no GPU to detect; its dependencies come with everything else in the next step.
DS_BUILD_OPS=${DS_BUILD_OPS:-0} DS_ACCELERATOR=cuda \
  "${PIP[@]}" install -q --no-build-isolation --no-cache-dir --no-deps --force-reinstall "$(grep -E '^deepspeed[=<>!~ ]' "$REQS")"
# Everything, resolved together (the DeepSpeed just built satisfies its pin). Wheels only, except the
# source-only pins (see the file's header): on a node the wheels do not fit (old glibc), pip stops
# instead of compiling vLLM's dependencies.
"${PIP[@]}" install -q --no-build-isolation --only-binary=:all: --no-binary=deepspeed,connection_pool -r "$REQS"
"${PIP[@]}" install -q --no-deps -e .
# ewa's own metadata pins the CPU set (transformers 5.23, numpy 2.4, ...): pip check reports those lines,
# expected with --no-deps. Anything else is a real conflict.
problems=$("${PIP[@]}" check 2>&1 | grep -v -E '^(ewa |No broken requirements)' || true)
if [ -n "$problems" ]; then
  say "pip check found conflicts outside ewa's CPU pins:"; echo "$problems" >&2; exit 1
fi
"$VENV/bin/python" - <<'EOF'
import importlib.metadata
import torch, transformers, trl, vllm, deepspeed, ewa  # noqa: F401
# The index's CUDA wheel is version 2.13.0 to pip and reports itself as 2.13.0+cu130; a CPU build has no CUDA.
assert torch.version.cuda and importlib.metadata.version("torch") == "2.13.0", f"not the CUDA torch: {torch.__version__}"
from deepspeed.git_version_info import torch_info
built = (torch_info["version"], torch_info["cuda_version"])
assert built == (".".join(torch.__version__.split(".")[:2]), torch.version.cuda), f"deepspeed was built for torch/CUDA {built}"
gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
print(f"setup-gpu: ready (torch {torch.__version__} CUDA {torch.version.cuda}, vllm {vllm.__version__}, "
      f"trl {trl.__version__}, transformers {transformers.__version__}, deepspeed {deepspeed.__version__}; "
      f"{gpus} GPU(s) visible)")
EOF
