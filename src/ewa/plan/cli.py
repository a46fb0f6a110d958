"""`ewa plan --configfile FILE [--profile DIR] [--json]`: GPUs, memory per GPU, hours, disk and sandbox
work of every rule of one run, and their totals over science_all's seeds, before anything is queued.
Exits 1 with one line naming the rule when a job would not fit the GPU memory the profile declares;
writes nothing but stdout (and that line on stderr)."""
from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from pathlib import Path

from ewa.errors import UserError
from ewa.plan.memory import MAX_MEMORY_SHARE
from ewa.plan.workload import PROMPT_TOKENS

WIDTH = 100  # text plan width: readable in a terminal and in the README


def add_plan_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", required=True, metavar="FILE",
                   help="the whole experiment config, as given to snakemake --configfile")
    p.add_argument("--profile", metavar="DIR",
                   help="the Snakemake profile the run uses (its set-resources: gpu, gpu_mem_gb or gpu_model, "
                        "mem_mb, runtime; retries); without it every rule runs on the CPU")
    p.add_argument("--model-config", metavar="PATH",
                   help="the model's config.json, or a directory holding one (default: <model.init>/config.json)")
    p.add_argument("--prompt-tokens", type=int, default=PROMPT_TOKENS, metavar="N",
                   help=f"tokens of one problem's prompt (default: {PROMPT_TOKENS}, assumed)")
    p.add_argument("--problems", nargs="+", default=[], metavar="BENCHMARK=N",
                   help="problems a benchmark holds after its filters (default: counted for bundled sets, "
                        "else an assumption the plan names)")
    p.add_argument("--alphas-at-once", type=int, metavar="N",
                   help="merged models on disk at once with merge.temp (default: every alpha: on a cluster all "
                        "merges finish in minutes, long before sampling deletes the first)")
    p.add_argument("--max-memory-share", type=float, default=MAX_MEMORY_SHARE, metavar="SHARE",
                   help=f"refuse a GPU job whose planned peak exceeds this share of the GPU memory the profile "
                        f"gives (default: {MAX_MEMORY_SHARE:g}; the rest is for allocator fragmentation and "
                        f"transients the plan does not model)")
    p.add_argument("--families", metavar="YAML|FILE",
                   help="price these merge families on top of the config's (a YAML list, or a config file whose "
                        "merge.families is taken), e.g. the trajectories and a simplex of docs/beyond.md")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")


def given_problems(items: list[str], benchmarks: dict) -> dict[str, int]:
    given = {}
    for item in items:
        name, _, count = item.partition("=")
        if name not in benchmarks or not count.isdigit():
            raise UserError(f"--problems: expected BENCHMARK=N with BENCHMARK one of {', '.join(benchmarks)}, "
                            f"got {item!r}")
        given[name] = int(count)
    return given


def with_families(config: dict, text: str) -> dict:
    """The config with more merge families (`--families`), validated again."""
    import yaml

    from ewa.config import validate

    try:
        inline = text.lstrip().startswith(("[", "{", "-"))
        raw = yaml.safe_load(text if inline else Path(text).read_text())
    except OSError as e:
        raise UserError(f"--families: {text}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise UserError(f"--families: not valid YAML ({e.__class__.__name__})") from None
    extra = (raw.get("merge") or {}).get("families") if isinstance(raw, dict) else raw
    if not isinstance(extra, list) or not extra:
        raise UserError("--families: expected a list of families, or a config file with merge.families")
    merged = {**config, "merge": {**config["merge"], "families": [*config["merge"].get("families", []), *extra]}}
    return validate(merged)


def plan_inputs(args: argparse.Namespace):
    """What every rule's plan reads: the validated config, the architecture, the profile and the workload."""
    from ewa.config import load
    from ewa.families import count_models
    from ewa.plan import workload
    from ewa.plan.estimate import Inputs
    from ewa.plan.model import architecture
    from ewa.plan.profile import load_profile

    if not 0 < args.max_memory_share <= 1:
        raise UserError(f"--max-memory-share: expected a share of the GPU memory in (0, 1], got {args.max_memory_share:g}")
    if not Path(args.configfile).is_file():
        raise UserError(f"--configfile: {args.configfile} is missing")
    config = load(args.configfile)
    if args.families:
        config = with_families(config, args.families)
    profile = load_profile(args.profile)
    model_config = args.model_config
    if not model_config:  # a hub name: its config.json in the cache, staged with the weights or without them
        from ewa.hub import pinned, resolve_config

        resolved = resolve_config(config, configfile=args.configfile, metadata_only=True, data=False)
        config = pinned(config, resolved)
        model_config = resolved["model.init"].local if "model.init" in resolved else None
    arch = architecture(config["model"], model_config)
    given = given_problems(args.problems, config["benchmarks"])
    benchmarks = [workload.benchmark(name, entry, config["seed"], given)
                  for name, entry in config["benchmarks"].items()]
    train = workload.benchmark("train_data", config["train_data"], config["seed"], {})
    return Inputs(config, arch, profile, args.prompt_tokens, benchmarks, train.tests,
                  args.alphas_at_once or count_models(config).merges, args.max_memory_share)


def build_plan(args: argparse.Namespace) -> dict:
    from ewa.plan import memory, speed, workload
    from ewa.plan.estimate import disk, plan_rules, science_all

    inputs = plan_inputs(args)
    arch, profile, benchmarks = inputs.arch, inputs.profile, inputs.benchmarks
    rules = plan_rules(inputs)
    refusal = next((r.refusal for r in rules.values() if r.refusal), None)
    run_disk = disk(inputs, rules)
    return {
        "configfile": str(args.configfile), "profile": profile.path, "model": arch.summary(),
        "rules": {name: vars(r) for name, r in rules.items()}, "disk": run_disk,
        "science_all": science_all(inputs, rules, run_disk),
        "benchmarks": [vars(b) for b in benchmarks], "train_tests_per_problem": inputs.train_tests,
        "assumptions": {**workload.constants(), "prompt_tokens": args.prompt_tokens, **memory.constants(),
                        **speed.constants()},
        "max_memory_share": args.max_memory_share, "fits": refusal is None, "refusal": refusal,
    }


def wrap(text: str) -> list[str]:
    """Lines of at most WIDTH characters that never split a number from its unit."""
    glued = re.sub(r"(\d) (min|h|s|GB)\b", "\\1\u00a0\\2", text)  # textwrap breaks only at ASCII spaces
    lines = textwrap.wrap(glued, WIDTH, subsequent_indent="  ", break_on_hyphens=False)
    return [line.replace("\u00a0", " ") for line in lines]


def cell(value) -> str:
    if value is None or value == 0:
        return "-"
    return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"


def render(plan: dict) -> str:
    m = plan["model"]
    lines = [f"ewa plan: {plan['configfile']} on {plan['profile'] or 'no profile (CPU only)'}",
             f"model: {m['model_type']} from {m['source']}: {m['parameters']:,} parameters", "",
             f"{'rule':<9}{'jobs':>5}{'GPUs':>6}{'peak GB/GPU':>14}{'h/job':>8}{'GPU-h':>8}{'CPU-h':>9}"
             f"{'programs':>14}{'written GB':>12}"]
    for r in plan["rules"].values():
        peak = f"{r['peak_gb']:.1f}/{r['gpu_mem_gb']:g}" if r["peak_gb"] is not None else "-"
        lines.append(f"{r['rule']:<9}{r['jobs']:>5}{r['gpus']:>6}{peak:>14}{cell(r['hours']):>8}"
                     f"{cell(r['gpu_hours']):>8}{cell(r['cpu_hours']):>9}{cell(r['program_runs']):>14}"
                     f"{cell(r['disk_gb']):>12}" + ("  REFUSED" if r["refusal"] else ""))
    lines.append("")
    for r in plan["rules"].values():
        for d in r["details"]:
            lines += wrap(f"{r['rule']}: {d}")
    d = plan["disk"]
    kept = " + ".join(f"{k} {v:,.1f}" for k, v in d["kept_gb"].items())
    merged = (f"merged models are temp: {d['merged_peak_gb']:,.1f} GB for {d['alphas_at_once']} alphas at once, "
              f"{d['merged_all_gb']:,.1f} GB if all were kept" if d["merge_temp"]
              else f"merged models kept: {d['merged_all_gb']:,.1f} GB")
    lines += [""] + wrap(f"disk: kept {kept} = {d['total_gb']:,.1f} GB; peak {d['peak_gb']:,.1f} GB (trainer "
                         f"checkpoints {d['trainer_checkpoints_gb']:,.1f} GB while training; {merged})")
    s = plan["science_all"]
    init = (f"from science.init_from ({s['init_from']}), no init built" if s["init_from"] else
            f"from one init (science.init_seed {s['init_seed']})" if s["init_seed"] is not None else
            "each from its own init (no science.init_seed)")
    lines += wrap(f"science_all (what make science runs): the train, merge, sample and evaluate jobs above once "
                  f"per seed of science.seeds ({s['seeds']}), {init}: {s['gpu_hours']:,} GPU-h, "
                  f"{s['cpu_hours']:,} CPU-h, {s['kept_gb']:,} GB kept")
    bench = "; ".join(f"{b['name']} {b['problems']} problems x {b['tests']:.0f} tests"
                      + ("" if b["counted"] else " (assumed: --problems NAME=N)") for b in plan["benchmarks"])
    a = plan["assumptions"]
    lines += wrap(f"assumed: {bench}; prompt {a['prompt_tokens']:,} tokens; {a['cpu_s_per_test']} CPU-s per test; "
                  f"train MFU {a['train_mfu']}, decode {a['decode_mbu']} of HBM bandwidth (src/ewa/plan/speed.py)")
    return "\n".join(lines)


def plan(args: argparse.Namespace, _config: dict) -> int:
    result = build_plan(args)
    print(json.dumps(result, indent=2) if args.json else render(result))
    if result["refusal"]:
        print(result["refusal"], file=sys.stderr)
        return 1
    return 0


COMMANDS = {"plan": (add_plan_arguments, plan)}
