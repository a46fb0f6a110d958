"""`ewa merge A B --alpha 1.5 --out OUT` (or `--alphas ... --out-pattern 'dir/{alpha}'` for a grid in
one pass): theta(a) = (1-a)*theta_A + a*theta_B, streamed over safetensors shards.

`ewa merge-point --source=-0.5:INIT --source=1.5:HIGH --out OUT`: any affine combination sum_i w_i * theta_i
(weights summing to 1) of several models, a point of a merge family (ewa.families)."""
from __future__ import annotations

from ewa.alphas import alpha_tag
from ewa.merge import HASH_MODES, MergeError, merge_linear, merge_task_arithmetic


def add_output_options(parser) -> None:
    parser.add_argument("--device", default=None, choices=["auto", "cpu", "cuda"],
                        help="where the float32 arithmetic runs (default: the config's merge.device)")
    parser.add_argument("--max-shard-size", default=None,
                        help="largest output shard file, e.g. 2GB (default: merge.max_shard_size)")
    parser.add_argument("--hash", default="sampled", choices=HASH_MODES,
                        help="input fingerprint in ewa_merge.json: sampled blocks (fast) or sha256 of every byte")


def add_merge_arguments(parser) -> None:
    parser.add_argument("a_dir", metavar="A_DIR", help="checkpoint at alpha = 0 (lowest-coverage regime)")
    parser.add_argument("b_dir", metavar="B_DIR", help="checkpoint at alpha = 1 (highest-coverage regime)")
    grid = parser.add_mutually_exclusive_group(required=True)
    grid.add_argument("--alpha", type=float, help="one alpha; output goes to --out")
    grid.add_argument("--alphas", type=float, nargs="+", metavar="ALPHA",
                      help="several alphas from one pass; outputs go to --out-pattern")
    parser.add_argument("--out", metavar="OUT_DIR", help="output model directory (with --alpha)")
    parser.add_argument("--out-pattern", metavar="PATTERN",
                        help="output directory per alpha, {alpha} replaced by its tag: results/merged/{alpha}")
    add_output_options(parser)


def merge(args, config: dict) -> int:
    if args.alpha is not None:
        if not args.out or args.out_pattern:
            raise MergeError("--alpha needs --out OUT_DIR (and no --out-pattern)")
        alphas, out_dirs = [args.alpha], [args.out]
    else:
        if not args.out_pattern or "{alpha}" not in args.out_pattern or args.out:
            raise MergeError("--alphas needs --out-pattern containing {alpha} (and no --out)")
        alphas = args.alphas
        out_dirs = [args.out_pattern.replace("{alpha}", alpha_tag(a)) for a in alphas]
    settings = config["merge"]
    from ewa.train.outcome import warn_if_untestable  # identical endpoints: every alpha is the same model

    warn_if_untestable(args.a_dir, args.b_dir, "ewa merge")
    merge_linear(args.a_dir, args.b_dir, alphas, out_dirs, device=args.device or settings["device"],
                 max_shard_bytes=args.max_shard_size or settings["max_shard_size"], hash_mode=args.hash)
    for alpha, out in zip(alphas, out_dirs):
        print(f"alpha {alpha:+g}: {out}")
    return 0


def parse_source(text: str) -> tuple[float, str]:
    weight, sep, path = text.partition(":")
    try:
        if not sep or not path:
            raise ValueError
        return float(weight), path
    except ValueError:
        raise MergeError(f"--source {text!r}: expected WEIGHT:DIR, e.g. 1.5:results/seed0/checkpoints/high") from None


def add_point_arguments(parser) -> None:
    parser.add_argument("--source", action="append", required=True, metavar="WEIGHT:DIR",
                        help="one model and its weight; the weights sum to 1 and the first model is the base "
                             "(theta = theta_base + sum_i w_i * (theta_i - theta_base))")
    parser.add_argument("--out", required=True, metavar="OUT_DIR", help="output model directory")
    add_output_options(parser)


def merge_point(args, config: dict) -> int:
    sources = [parse_source(s) for s in args.source]
    total = sum(w for w, _ in sources)
    if abs(total - 1.0) > 1e-6:
        raise MergeError(f"--source weights {[w for w, _ in sources]} sum to {total:g}, not 1")
    (_, base), *rest = sources
    settings = config["merge"]
    merge_task_arithmetic(base, [path for _, path in rest], [[w for w, _ in rest]], [args.out],
                          device=args.device or settings["device"],
                          max_shard_bytes=args.max_shard_size or settings["max_shard_size"], hash_mode=args.hash)
    print(" + ".join(f"{w:+g} {path}" for w, path in sources) + f": {args.out}")
    return 0


COMMANDS = {"merge": (add_merge_arguments, merge), "merge-point": (add_point_arguments, merge_point)}
