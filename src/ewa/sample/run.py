"""Sample every problem of a benchmark in one setting: n records per problem, appended as each
problem finishes (resumable from the same inputs only), renamed onto the output only when every
problem has its n samples. One run writes an output at a time (`ewa.io.exclusive_output`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from pathlib import Path

from ewa.checkpoint import MODEL_WEIGHT_FILES, check_loadable, fingerprint, merge_record, read_checkpoint
from ewa.errors import UserError
from ewa.io import exclusive_output, provenance, sha256_file, write_json, write_jsonl
from ewa.problems import Problem
from ewa.progress import Progress
from ewa.sample.backends import make_backend, resolve_backend
from ewa.chat import load_tokenizer
from ewa.sample.config import SampleConfig
from ewa.sample.records import PartialWriter, partial_path, read_partial
from ewa.sample.settings import Sample, setting_class

RECORD_FIELDS = ("problem_id", "sample_id", "seed", "setting", "model", "backend", "code", "submitted",
                 "turn_codes", "completion", "tokens_generated", "turns", "tool_calls", "tool_outcomes", "finish_reason",
                 "params")


def provenance_path(out: str | os.PathLike) -> Path:
    out = Path(out)
    return out.with_name(out.name.removesuffix(".jsonl") + ".provenance.json")


def record(s: Sample, expect: dict) -> dict:
    """One JSONL record: the submission, the transcript, and all that is needed to regenerate it."""
    return {
        "problem_id": s.problem.id, "sample_id": s.sample_id, "seed": s.seed, "code": s.code,
        "submitted": s.submitted, "turn_codes": s.turn_codes, "completion": s.completion,
        "tokens_generated": s.tokens_generated, "turns": s.turns, "tool_calls": s.tool_calls,
        "tool_outcomes": s.tool_outcomes, "finish_reason": s.finish_reason, **expect,
    }


# Files besides the weights that shape what a model generates.
MODEL_TEXT_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                    "chat_template.jinja", "special_tokens_map.json", "vocab.json", "merges.txt")


def model_fingerprint(model_dir: str | os.PathLike) -> dict:
    """The model by content: sampled hashes of its safetensors shards (headers, sizes, spread blocks),
    full hashes of other weight files, and its config, tokenizer and chat template."""
    path = Path(model_dir)
    if any((path / f).is_file() for f in MODEL_WEIGHT_FILES[:2]):
        weights = fingerprint(read_checkpoint(path))["files"]
    else:
        weights = {f: sha256_file(path / f) for f in MODEL_WEIGHT_FILES[2:] if (path / f).is_file()}
    return {"weights": weights, **{f: sha256_file(path / f) for f in MODEL_TEXT_FILES if (path / f).is_file()}}


def inputs_fingerprint(problems: list[Problem], setting: str, config: SampleConfig, model_dir, backend: str,
                       sandbox: dict | None, calibration: str | None) -> dict:
    """What a partial file may be resumed from: the same model, problems and settings, by content."""
    digest = hashlib.sha256()
    for p in problems:
        digest.update(json.dumps(dataclasses.asdict(p), sort_keys=True, default=str).encode())
    return {"model": model_fingerprint(model_dir), "problems": digest.hexdigest(), "setting": setting,
            "backend": backend, "config": dataclasses.asdict(config), "sandbox": sandbox,
            "calibration": sha256_file(calibration) if calibration else None}


def check_complete(done: dict[str, list[dict]], problems: list[Problem], n: int, partial: Path) -> None:
    """n samples, numbered 0..n-1, for every problem, or an error: never publish a short file."""
    for p in problems:
        ids = [r["sample_id"] for r in done.get(p.id, [])]
        if ids != list(range(n)):
            raise UserError(f"{partial}: problem {p.id!r} has samples {ids[:8]} instead of 0..{n - 1}; "
                            f"was it written by another run? Nothing was published")


def sample_file(problems: list[Problem], setting_name: str, config: SampleConfig, model_dir: str,
                out: str | os.PathLike, sandbox: dict | None = None, calibration: str | None = None,
                workers: int = 2, progress: bool = True) -> Path:
    """Write `out` (JSONL, one record per sample, problems in input order) and its provenance sidecar.

    `sandbox`: the config's validated sandbox section, for the settings that run code; `calibration`: its
    calibration.json.
    """
    setting_cls = setting_class(setting_name)
    backend_name = resolve_backend(config.backend)
    check_loadable(model_dir, "--model")  # before anything is written: a model that would not load whole
    inputs = inputs_fingerprint(problems, setting_name, config, model_dir, backend_name,
                                sandbox if setting_cls.uses_sandbox else None, calibration)
    tokenizer = load_tokenizer(model_dir)
    out, partial = Path(out), partial_path(out)
    expect = {"setting": setting_name, "model": str(model_dir), "backend": backend_name,
              "params": config.params(setting_name)}
    ids = {p.id for p in problems}
    with exclusive_output(out, partial, provenance_path(out), what="ewa sample"):
        done = {pid: recs for pid, recs in read_partial(partial, expect, config.n, inputs).items() if pid in ids}
        resumed = bool(done)
        meter = sample_progress(out, problems, done) if progress else None
        if meter is not None:
            from ewa.progress import quiet_bars

            quiet_bars()  # the backend's weight loading: the job's own lines say how far it is
        try:
            with meter or contextlib.nullcontext():  # done once the output is published
                backend_info, sandbox_info = sample_into(
                    done, problems, setting_cls, config, model_dir, tokenizer, expect,
                    PartialWriter(partial, done, inputs), sandbox, calibration, workers, meter)
                check_complete(done, problems, config.n, partial)
                write_json(provenance_path(out), provenance(
                    dataclasses.asdict(config), setting=setting_name, model=str(model_dir),
                    model_record=merge_record(model_dir), model_fingerprint=inputs["model"], backend=backend_name,
                    backend_info=backend_info, problems=len(problems), sandbox=sandbox_info,
                    record_fields=list(RECORD_FIELDS)))
                write_jsonl(out, (r for p in problems for r in done[p.id]))
        except Exception:
            if not resumed:  # what this run started goes with it; a resumed run's progress stays
                partial.unlink(missing_ok=True)
            raise
        partial.unlink()
    return out


def sample_progress(out: Path, problems: list[Problem], done: dict) -> Progress:
    """Problems done of all, with samples/s and tokens/s: lines on stderr and the job's progress file
    (ewa.progress)."""
    return Progress("sample", len(problems), "problems", out=out, initial=len(done),
                    label=f"ewa sample {out.parent.parent.name} {out.parent.name}/{out.stem}",
                    counters={"samples": "samples", "tokens": "tokens"})


def sample_into(done: dict, problems, setting_cls, config, model_dir, tokenizer, expect: dict,
                writer: PartialWriter, sandbox, calibration, workers,
                meter: Progress | None) -> tuple[dict | None, dict | None]:
    """Sample every problem not in `done`, appending each to the partial file and to `done` (and counting it
    on `meter`); returns what the backend and the sandbox (if one ran) say about themselves."""
    setting_name, backend_name = expect["setting"], expect["backend"]
    todo = [p for p in problems if p.id not in done]
    sandbox_info = backend_info = None
    with contextlib.ExitStack() as stack:
        stack.callback(writer.close)
        if todo:
            runner = None  # the sandbox tool calls and feedback run in
            if setting_cls.uses_sandbox:
                from ewa.sandbox import sandbox_from_config

                runner = stack.enter_context(sandbox_from_config(sandbox, calibration=calibration, workers=workers))
                sandbox_info = runner.info()
                from ewa.sandbox.semantics import provenance as judge_provenance
                sandbox_info["judge"] = judge_provenance(p.judge for p in problems)
            backend = stack.enter_context(make_backend(backend_name, model_dir, tokenizer, config))
            backend_info = backend.info
            if meter is not None:  # the model is loaded: the start line now, rates from here on
                meter.restart_rates(len(done))
                meter.update(done=len(done))
            setting = setting_cls(config, tokenizer, runner, workers)
            # Chunks are fixed slices of the problem list, so a resumed run batches as the first did.
            rows = config.batch_size if backend_name == "hf" else config.rows_per_call
            per_chunk = max(1, rows // config.n)
            for at in range(0, len(problems), per_chunk):
                chunk = [p for p in problems[at:at + per_chunk] if p.id not in done]
                if not chunk:
                    continue
                samples = [setting.start(p, i) for p in chunk for i in range(config.n)]
                setting.run(samples, backend)
                for p in chunk:
                    done[p.id] = [record(s, expect) for s in samples if s.problem is p]
                    writer.append(done[p.id])
                    if meter is not None:
                        meter.update(1, samples=len(done[p.id]), tokens=sum(r["tokens_generated"] or 0 for r in done[p.id]))
    return backend_info, sandbox_info
