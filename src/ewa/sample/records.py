"""Sample records, per-sample seeds, and the resumable partial file a sampling run appends to.

A run appends each finished problem's records to `<out>.partial.jsonl` (flush + fsync), after a first
line holding the fingerprint of its inputs (model weights, problems, settings). A restarted run keeps
every complete problem there when the fingerprint matches, drops a torn last line, and continues; a
partial file made from other inputs is set aside whole. Only the finished file is renamed onto `<out>`.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from ewa.io import atomic_path


def derive_seed(*parts) -> int:
    """A 31-bit seed from any parts (base seed, problem id, sample index, call index)."""
    digest = hashlib.sha256(":".join(str(p) for p in ("ewa-sample", *parts)).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def sample_seed(config, problem_id: str, sample_index: int) -> int:
    """A sample's seed: from the run's seed, the model's stream, the problem and the sample index.

    With a stream per model (the default) two alphas draw independent samples, as the ensemble
    estimator assumes; common random numbers (stream "") share draws across models for paired
    comparisons.
    """
    if config.stream:
        return derive_seed(config.seed, config.stream, problem_id, sample_index)
    return derive_seed(config.seed, problem_id, sample_index)


def partial_path(out: str | os.PathLike) -> Path:
    out = Path(out)
    return out.with_name(out.name.removesuffix(".jsonl") + ".partial.jsonl")


HEADER_KEY = "ewa_partial_inputs"


def read_partial(path: Path, expect: dict, n: int, inputs: dict) -> dict[str, list[dict]]:
    """Complete problems of an interrupted run on the same `inputs` (a fingerprint), by problem id.

    A torn last line is dropped; a file made from other inputs, or records made with other `expect`
    fields, are dropped with a warning.
    """
    if not path.exists():
        return {}
    by_problem: dict[str, list[dict]] = {}
    stale = 0
    with open(path, errors="replace") as f:
        try:
            header = json.loads(f.readline()).get(HEADER_KEY)
        except (json.JSONDecodeError, AttributeError):
            header = None
        if header != inputs:
            print(f"sample: {path}: made from other inputs (model, problems or settings); set aside, sampling "
                  f"afresh", file=sys.stderr)
            return {}
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                break  # a write cut short by the kill; nothing after it was acknowledged
            if not line.endswith("\n"):
                break
            if any(rec.get(k) != v for k, v in expect.items()):
                stale += 1
                continue
            by_problem.setdefault(rec["problem_id"], []).append(rec)
    if stale:
        print(f"sample: {path}: dropped {stale} records made with other settings", file=sys.stderr)
    return {pid: sorted(recs, key=lambda r: r["sample_id"]) for pid, recs in by_problem.items()
            if sorted(r["sample_id"] for r in recs) == list(range(n))}


class PartialWriter:
    """Appends whole problems to the partial file; each append is durable before the next starts."""

    def __init__(self, path: Path, kept: dict[str, list[dict]], inputs: dict):
        self.path = path
        with atomic_path(path) as tmp, open(tmp, "w") as f:  # rewrite without torn or stale lines
            f.write(json.dumps({HEADER_KEY: inputs}) + "\n")
            for recs in kept.values():
                f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in recs)
        self.f = open(path, "a")

    def append(self, records: list[dict]) -> None:
        self.f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        self.f.flush()
        os.fsync(self.f.fileno())

    def close(self) -> None:
        self.f.close()
