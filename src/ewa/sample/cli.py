"""`ewa sample`: sample a model on a benchmark in one inference setting (the config's `sample` section;
tool calls and agentic feedback run in the `sandbox` section's sandbox)."""
from __future__ import annotations

from ewa.errors import UserError
from ewa.runtime import configure_cpu


def add_sample_arguments(p) -> None:
    p.add_argument("--model", required=True, help="Hugging Face model directory (weights + tokenizer)")
    p.add_argument("--problems", required=True, help="problems.jsonl in the canonical format")
    p.add_argument("--setting", required=True, help="reasoning | tools | agentic")
    p.add_argument("--out", required=True, help="output JSONL, e.g. results/seed0/samples/alpha+0.50/lcb_hard/reasoning.jsonl")
    p.add_argument("--max-k", type=int, default=None, help="largest k evaluated later; sample.n must reach it")
    p.add_argument("--backend", "--sandbox-backend", dest="backend", default=None,
                   help="sandbox for tool calls and agentic feedback (default: the config's sandbox.backend)")
    p.add_argument("--workers", type=int, default=2, help="sandbox workers")
    p.add_argument("--calibration", default=None, help="calibration.json of `ewa calibrate` (default: measure now)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads of the hf backend (default: torch's; 1 avoids spin contention on busy cores)")
    p.add_argument("--stream", default=None,
                   help="name of this model's random stream (default: the model directory's name, e.g. alpha+0.50)")
    p.add_argument("--limit-problems", type=int, default=None, metavar="K", help="only the first K problems")


def sample(args, config: dict) -> int:
    from ewa.problems import read_problems
    from ewa.sample.backends import resolve_backend
    from ewa.sample.config import SampleConfig
    from ewa.sample.run import sample_file
    from ewa.sample.settings import setting_class

    from pathlib import Path

    stream = args.stream if args.stream is not None else Path(args.model).resolve().name
    settings = SampleConfig.from_dict(config["sample"], seed=config["seed"], stream=stream)
    setting_class(args.setting)
    resolve_backend(settings.backend)
    if args.max_k is not None and settings.n < args.max_k:
        raise UserError(f"sample.n={settings.n} is smaller than the largest k ({args.max_k}) evaluated later; "
                        f"raise sample.n or lower evaluate.k / evaluate.budget")
    if args.limit_problems is not None and args.limit_problems < 1:
        raise UserError(f"--limit-problems must be >= 1, got {args.limit_problems}")
    configure_cpu(args.threads)
    problems = read_problems(args.problems)[:args.limit_problems]
    sandbox = {**config["sandbox"], **({"backend": args.backend} if args.backend else {})}
    sample_file(problems, args.setting, settings, args.model, args.out, sandbox=sandbox,
                calibration=args.calibration, workers=args.workers)
    return 0


COMMANDS = {"sample": (add_sample_arguments, sample)}
