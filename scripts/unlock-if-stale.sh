#!/usr/bin/env bash
# Remove Snakemake's lock only when it is stale: a run killed with SIGKILL (or a power loss) leaves
# .snakemake/locks behind, and the same command must then simply resume. A lock held by a live
# snakemake working in this directory is left alone, so two runs still cannot collide.
set -euo pipefail
dir=$(cd "${1:-.}" && pwd -P)
[ -n "$(ls -A "$dir/.snakemake/locks" 2>/dev/null)" ] || exit 0
for proc in /proc/[0-9]*; do
  [ "$(readlink "$proc/cwd" 2>/dev/null)" = "$dir" ] || continue
  # argv[0] or argv[1] (python's script) is snakemake itself, not a shell that will start one
  mapfile -d '' -t argv < "$proc/cmdline" 2>/dev/null || continue
  for arg in "${argv[@]:0:2}"; do
    [ "$(basename -- "$arg")" = snakemake ] && exit 0  # a live run holds the lock
  done
done
echo "unlock-if-stale: removing the stale lock of a killed run in $dir" >&2
rm -f "$dir"/.snakemake/locks/*
