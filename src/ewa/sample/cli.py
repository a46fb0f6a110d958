"""`ewa sample`: sample a model on a benchmark in one inference setting."""
from __future__ import annotations


from ewa.cli import UserError
from ewa.io import json_object_arg


def add_arguments(p) -> None:
    p.add_argument("--model", required=True, help="Hugging Face model directory (weights + tokenizer)")
    p.add_argument("--problems", required=True, help="problems.jsonl in the canonical format")
    p.add_argument("--setting", required=True, help="reasoning | tools | agentic")
    p.add_argument("--settings", default="{}",
                   help="the config's sample section, as JSON or a JSON file (n, max_new_tokens, temperature, "
                        "top_p, batch_size, backend, seed, tools, agentic, tensor_parallel_size)")
    p.add_argument("--out", required=True, help="output JSONL, e.g. results/samples/{model}/{benchmark}/{setting}.jsonl")
    p.add_argument("--max-k", type=int, default=None, help="largest k evaluated later; sample.n must reach it")
    p.add_argument("--sandbox-backend", default="auto", help="sandbox for tool calls and agentic feedback")
    p.add_argument("--workers", type=int, default=2, help="sandbox workers")
    p.add_argument("--calibration", default=None, help="calibration.json of `ewa calibrate` (default: measure now)")
    p.add_argument("--time-factor", type=float, default=None, help="use this time-limit factor instead")
    p.add_argument("--python", default=None, help="the sandbox interpreter (default /usr/bin/python3)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads of the hf backend (default: torch's; 1 avoids spin contention on busy cores)")
    p.add_argument("--limit-problems", type=int, default=None, metavar="K", help="only the first K problems")


def read_settings(text: str) -> dict:
    return json_object_arg(text, "--settings")


def run(args) -> int:
    from ewa.problems import read_problems
    from ewa.sample.backends import resolve_backend
    from ewa.sample.config import SampleConfig
    from ewa.sample.run import sample_file
    from ewa.sample.settings import setting_class

    config = SampleConfig.from_dict(read_settings(args.settings))
    setting_class(args.setting)
    resolve_backend(config.backend)
    if args.max_k is not None and config.n < args.max_k:
        raise UserError(f"sample.n={config.n} is smaller than the largest k ({args.max_k}) evaluated later; "
                        f"raise sample.n or lower evaluate.k / evaluate.budget")
    if args.limit_problems is not None and args.limit_problems < 1:
        raise UserError(f"--limit-problems must be >= 1, got {args.limit_problems}")
    if args.threads is not None:
        if args.threads < 1:
            raise UserError(f"--threads must be >= 1, got {args.threads}")
        import torch

        torch.set_num_threads(args.threads)
    problems = read_problems(args.problems)[:args.limit_problems]
    sample_file(problems, args.setting, config, args.model, args.out,
                sandbox_options={"backend": args.sandbox_backend, "workers": args.workers,
                                 "calibration_path": args.calibration, "time_factor": args.time_factor,
                                 "python": args.python})
    return 0
