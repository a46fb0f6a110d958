"""`ewa signal`: the learning signal GRPO will get, measured before training.

GRPO's advantage is a completion's reward minus its group's mean, so only a prompt whose group of
`grpo.num_generations` completions has mixed rewards moves the weights. This samples the init k times
(the group size) on a seeded slice of the training problems with the project's sampler, in the reasoning
setting GRPO trains in and with GRPO's own temperature, top-p and completion length, judges every
completion with each regime's training reward (ewa.train.reward, in the sandbox), and reports per regime
the mean reward and the share of prompts whose group is mixed. Where too few are (under half a mixed group
per GRPO step), one warning line says GRPO cannot move: a model that solves nothing, or everything, on the
training problems would train for hours into a copy of its init. Run it before queueing, like `ewa plan`
and `ewa preflight`:

    ewa signal --config experiment.yaml --init results/seed0/init --problems results/seed0/data/_train/problems.jsonl --out results/seed0/signal

It writes signal.json (the estimate and the provenance of everything that made it) and the samples it
judged. After training, ewa.train.outcome says whether the weights moved.
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from ewa.errors import UserError

LOW_SIGNAL = 0.5  # mixed groups per GRPO step (share x grpo.prompts_per_step) below which GRPO cannot move
DEFAULT_PROMPTS = 16


def group_signal(groups: dict[str, list[float]]) -> dict:
    """The signal of one regime from each prompt's group of rewards: how many groups are mixed (GRPO's
    gradient comes from these alone), the mean reward, and how many prompts some completion solved.

    >>> group_signal({"a": [0.0, 0.0], "b": [1.0, 0.0], "c": [1.0, 1.0]})["mixed_share"]
    0.3333333333333333
    """
    rewards = [r for g in groups.values() for r in g]
    mixed = sum(max(g) > min(g) for g in groups.values())
    return {"prompts": len(groups), "mixed": mixed, "mixed_share": mixed / len(groups),
            "mean_reward": sum(rewards) / len(rewards), "solved": sum(max(g) > 0 for g in groups.values())}


def warning(name: str, signal: dict, k: int, per_step: int) -> str | None:
    """One line when GRPO would see under LOW_SIGNAL mixed groups per step, else None."""
    expected = signal["mixed_share"] * per_step
    if expected >= LOW_SIGNAL:
        return None
    why = ("the init solves none of them" if not signal["solved"] else
           "the init solves every completion of them" if signal["mean_reward"] == 1 else "its groups agree")
    return (f"regime {name}: {signal['mixed']} of {signal['prompts']} prompts had mixed rewards over {k} samples "
            f"(mean reward {signal['mean_reward']:.3f}; {why}): about {expected:.1f} of a GRPO step's {per_step} "
            "groups would carry a gradient, so GRPO cannot move the weights; warm-start the init "
            "(model.sft), use a reward it can earn (grpo.reward: fraction), or easier training problems")


def signal_slice(problems: list, prompts: int, seed: int) -> list:
    """A seeded sample of the training problems, in file order (GRPO's shuffle draws from all of them)."""
    chosen = set(random.Random(seed).sample(range(len(problems)), min(prompts, len(problems))))
    return [p for i, p in enumerate(problems) if i in chosen]


def estimate(init: str, problems_path: str, regimes: list[dict], config: dict, prompts: int, k: int, out: Path,
             calibration: str | None = None, workers: int = 2) -> dict:
    """Sample, judge and write `out`/signal.json (and the samples); returns the record."""
    from ewa.io import atomic_path, provenance, read_jsonl, sha256_file, write_json
    from ewa.problems import read_problems
    from ewa.sample.config import SampleConfig
    from ewa.sample.run import sample_file
    from ewa.sandbox import sandbox_from_config
    from ewa.train.grpo import check_init, check_problems, init_fingerprint
    from ewa.train.reward import CoverageReward

    grpo, seed = config["grpo"], config["seed"]
    init = check_init(init)
    problems = read_problems(problems_path)
    for regime in regimes:
        check_problems(problems, regime, problems_path)
    chosen = signal_slice(problems, prompts, seed)
    length = grpo["max_completion_length"]
    # GRPO's rollouts: its group size, temperature, top-p and completion length, in the reasoning setting
    sampling = SampleConfig.from_dict({**config["sample"], "n": k, "temperature": grpo["temperature"],
                                       "top_p": grpo["top_p"], "max_new_tokens": length, "max_total_tokens": length,
                                       "assistant_prefix": ""}, seed=seed, stream="signal")
    with atomic_path(out) as tmp:
        tmp.mkdir()
        samples = sample_file(chosen, "reasoning", sampling, str(init), tmp / "samples.jsonl", workers=workers)
        records = [r for _, r in read_jsonl(samples)]
        by_id = {p.id: p for p in chosen}
        signals = {}
        with sandbox_from_config(config["sandbox"], calibration=calibration, workers=workers) as sandbox:
            judged_by = sandbox.info()
            for regime in regimes:
                reward = CoverageReward(by_id, regime, sandbox, grpo["reward"])
                rewards = reward([r["completion"] for r in records], problem_id=[r["problem_id"] for r in records])
                groups: dict[str, list[float]] = {}
                for r, value in zip(records, rewards, strict=True):
                    groups.setdefault(r["problem_id"], []).append(value)
                s = {**group_signal(groups), "verdicts": {key.split("/", 1)[1]: v for key, v in
                                                          reward.history[-1].items() if key.startswith("verdicts/")}}
                signals[regime["name"]] = {**s, "warning": warning(regime["name"], s, k, grpo["prompts_per_step"])}
        record = provenance({"grpo": grpo, "sample": config["sample"], "regimes": regimes, "seed": seed},
                            init=str(init), init_fingerprint=init_fingerprint(init), problems=str(problems_path),
                            problems_sha256=sha256_file(problems_path), prompts=[p.id for p in chosen], k=k,
                            low_signal=LOW_SIGNAL, sandbox=judged_by, regimes=signals)
        write_json(tmp / "signal.json", record)
    return record


def add_signal_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--init", required=True, help="the shared init (HF model directory from `ewa init`)")
    parser.add_argument("--problems", required=True, help="train problems (canonical JSONL)")
    parser.add_argument("--regime", action="append", default=None, metavar="NAME",
                        help="a regime of the config to judge by (repeatable; default: every regime)")
    parser.add_argument("--prompts", type=int, default=DEFAULT_PROMPTS,
                        help=f"training problems sampled (a seeded slice; default {DEFAULT_PROMPTS})")
    parser.add_argument("--k", type=int, default=None, help="samples per problem (default: grpo.num_generations)")
    parser.add_argument("--calibration", default=None,
                        help="calibration.json of `ewa calibrate` (default: measure now)")
    parser.add_argument("--workers", type=int, default=2, help="sandbox workers")
    parser.add_argument("--threads", type=int, default=None, help="torch threads of the hf backend")
    parser.add_argument("--out", required=True, type=Path, help="output directory: signal.json and the samples judged")


def signal(args: argparse.Namespace, config: dict) -> int:
    from ewa.runtime import configure_cpu
    from ewa.train.cli import regime_named

    regimes = [regime_named(config, name) for name in args.regime] if args.regime else config["regimes"]
    k = args.k if args.k is not None else config["grpo"]["num_generations"]
    if k < 2 or args.prompts < 1:
        raise UserError(f"--k must be >= 2 (a group) and --prompts >= 1, got --k {k} --prompts {args.prompts}")
    configure_cpu(args.threads)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    record = estimate(args.init, args.problems, regimes, config, args.prompts, k, args.out, args.calibration,
                      args.workers)
    for name, s in record["regimes"].items():
        print(f"regime {name}: {s['mixed']} of {s['prompts']} prompts with mixed rewards over {k} samples, "
              f"mean reward {s['mean_reward']:.3f}, solved by some sample {s['solved']}")
        if s["warning"]:
            print(f"ewa signal: warning: {s['warning']}", file=sys.stderr)
    return 0


COMMANDS = {"signal": (add_signal_arguments, signal)}
