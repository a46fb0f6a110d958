"""`ewa gpu-check`: a user's first command on a new GPU node (about 5 minutes). On the tiny model: the merge
on cuda against the CPU's (bitwise), sampling on cuda against the CPU's (the same completions for the same
seeds), those samples judged in the configured sandbox, two GRPO steps; and the measured peak memory of two
training steps of a model shape against `ewa plan`'s. One line per check (a failure names its fix); exit 0
only if all hold. `--cpu` runs every step a CPU can (the suite runs it)."""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path

from ewa.errors import UserError

CHECKS = ("merge", "sample", "judge", "train", "memory")


def add_gpu_check_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", metavar="FILE",
                   help="the experiment whose sandbox, sample, grpo and merge settings are checked (default: "
                        "--config, else config.yaml when present, else the schema's defaults)")
    p.add_argument("--cpu", action="store_true",
                   help="no GPU: every step on the CPU (merge and sampling twice, compared with themselves)")
    p.add_argument("--model", metavar="DIR",
                   help="the tiny model to check with (default: results/seed{seed}/init when the pipeline built it, "
                        "else one built now without SFT)")
    p.add_argument("--model-config", metavar="PATH",
                   help="the shape whose training-step memory is measured: a config.json or a directory holding one, "
                        "(default on a GPU: Qwen2.5-Coder-1.5B's, packaged; with --cpu: the tiny model's); random "
                        "init, nothing downloaded")
    p.add_argument("--prompt-tokens", type=int, default=None, metavar="N",
                   help="prompt tokens of the measured step (default: ewa plan's assumption)")
    p.add_argument("--only", nargs="+", choices=CHECKS, metavar="CHECK",
                   help=f"run only these checks ({', '.join(CHECKS)})")
    p.add_argument("--work", metavar="DIR", help="keep the models, samples and records here (default: a temp dir, "
                                                 "removed at the end)")
    p.add_argument("--out", metavar="FILE", help="write the JSON record (node, checks, figures, versions)")


def experiment(args: argparse.Namespace, config: dict) -> tuple[dict, str]:
    """The whole experiment the check reads, and where it came from."""
    from ewa.config import load

    if args.configfile:
        return load(args.configfile), args.configfile
    if args.config:
        return config, "--config"
    if Path("config.yaml").is_file():
        return load("config.yaml"), "config.yaml"
    return config, "the schema's defaults"


def header(device: str, source: str) -> str:
    import torch

    where = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    return (f"ewa gpu-check: {socket.gethostname()}: {where}, torch {torch.__version__} (CUDA {torch.version.cuda}); "
            f"config {source}")


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the sampling and memory runs)."""
    import resource

    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def run_checks(bench, names, model_config: Path | None, prompt_tokens: int) -> list:
    from ewa.gpucheck import checks

    outcomes = []
    for name in names:
        started, cpu = time.perf_counter(), cpu_seconds()
        try:
            if name == "memory":
                outcome = checks.check_memory(bench, model_config, prompt_tokens)
            else:
                outcome = getattr(checks, f"check_{name}")(bench)
        except Exception as e:  # a check that breaks is a failed check: the rest still run
            traceback.print_exc()
            outcome = checks.Outcome(name, "FAIL", f"{type(e).__name__}: {e}",
                                     f"the traceback above says where; rerun this check alone with ewa gpu-check "
                                     f"--only {name} --work DIR (DIR keeps its inputs and logs)")
        outcome.data.update(check_seconds=round(time.perf_counter() - started, 1),
                            check_cpu_seconds=round(cpu_seconds() - cpu, 1))
        print(outcome.line(), file=sys.stdout if outcome.status != "FAIL" else sys.stderr, flush=True)
        outcomes.append(outcome)
    return outcomes


def gpu_check(args: argparse.Namespace, config: dict) -> int:
    from ewa.plan.workload import PROMPT_TOKENS

    whole, source = experiment(args, config)
    device = "cpu" if args.cpu else "cuda"
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if args.cpu:  # before torch first asks: this process and its children see no GPU
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    try:
        import torch

        if device == "cuda" and not torch.cuda.is_available():
            visible = "unset" if hidden is None else repr(hidden)
            raise UserError(f"torch {torch.__version__} sees no CUDA device (CUDA {torch.version.cuda}, "
                            f"CUDA_VISIBLE_DEVICES={visible}): run ewa preflight --gpus 1, or ewa gpu-check --cpu")
        if args.model and not Path(args.model, "config.json").is_file():
            raise UserError(f"--model: {args.model} holds no config.json")
        if args.work and Path(args.work).exists() and any(Path(args.work).iterdir()):
            raise UserError(f"--work: {args.work} is not empty; name a new directory (a check's outputs are never "
                            f"written over)")
        if args.prompt_tokens is not None and args.prompt_tokens < 1:
            raise UserError(f"--prompt-tokens: must be at least 1, got {args.prompt_tokens}")
        if args.model_config and not Path(args.model_config).exists():
            raise UserError(f"--model-config: {args.model_config} is missing")
        model_config = Path(args.model_config) if args.model_config else None
        if model_config and model_config.is_dir():
            model_config = model_config / "config.json"
        return run(args, whole, source, device, model_config, args.prompt_tokens or PROMPT_TOKENS)
    finally:
        if args.cpu:
            if hidden is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = hidden


def run(args, whole: dict, source: str, device: str, model_config: Path | None, prompt_tokens: int) -> int:
    from ewa.gpucheck.bench import CPU, CUDA, Bench
    from ewa.io import versions, write_json

    print(header(device, source), flush=True)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="ewa-gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        bench = Bench(whole, work, device, CPU if device == "cpu" else CUDA, args.model)
        outcomes = run_checks(bench, args.only or CHECKS, model_config, prompt_tokens)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    failed = [o.name for o in outcomes if o.status == "FAIL"]
    seconds = time.perf_counter() - started
    if failed:
        print(f"ewa gpu-check: {len(failed)} of {len(outcomes)} checks failed ({', '.join(failed)}) in {seconds:.0f} s",
              file=sys.stderr)
    else:
        print(f"ewa gpu-check: every check holds ({len(outcomes)} run, "
              f"{sum(o.status == 'skipped' for o in outcomes)} skipped) in {seconds:.0f} s")
    if args.out:
        write_json(args.out, {"node": socket.gethostname(), "device": device, "config": source, "ok": not failed,
                              "failed": failed, "seconds": round(seconds, 1),
                              "checks": {o.name: {"status": o.status, "figure": o.figure, "fix": o.fix, **o.data}
                                         for o in outcomes},
                              "versions": versions(), "experiment": whole})
    return 1 if failed else 0


COMMANDS = {"gpu-check": (add_gpu_check_arguments, gpu_check)}
