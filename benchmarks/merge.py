"""Speed and peak memory of `ewa merge` against mergekit-yaml (linear, normalize: false) and the I/O floor
(`cat`: read A and B once, write one model's bytes per alpha), on synthetic Qwen2-shaped fp32 checkpoints.

    .venv/bin/python benchmarks/merge.py --gb 1          # sizes 0.5 and 1 GB; ~2-3 min on 2 cores
    .venv/bin/python benchmarks/merge.py --smoke         # one ~2 MB size of narrow tensors: checks it runs
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

BIN = Path(sys.executable).parent
DIMS = {"hidden": 1024, "intermediate": 2816, "heads": 16, "kv_heads": 4, "vocab": 16384}
# Narrow tensors, so a model of a few MB still has several layers and shards.
SMOKE_DIMS = {"hidden": 64, "intermediate": 176, "heads": 4, "kv_heads": 2, "vocab": 512}
SMOKE = {"gb": 0.002, "shard_mb": 1, "repeat": 1}
GRID = [-1.0, -0.5, 0.25, 0.5, 0.75, 1.25, 1.5, 2.0]  # no 0 or 1: those are plain copies
ONE_ALPHA = 1.5


def layer_shapes(i: int, dims: dict) -> dict[str, list[int]]:
    hidden, inter = dims["hidden"], dims["intermediate"]
    kv = hidden // dims["heads"] * dims["kv_heads"]
    p = f"model.layers.{i}."
    return {p + "self_attn.q_proj.weight": [hidden, hidden], p + "self_attn.q_proj.bias": [hidden],
            p + "self_attn.k_proj.weight": [kv, hidden], p + "self_attn.k_proj.bias": [kv],
            p + "self_attn.v_proj.weight": [kv, hidden], p + "self_attn.v_proj.bias": [kv],
            p + "self_attn.o_proj.weight": [hidden, hidden],
            p + "mlp.gate_proj.weight": [inter, hidden], p + "mlp.up_proj.weight": [inter, hidden],
            p + "mlp.down_proj.weight": [hidden, inter],
            p + "input_layernorm.weight": [hidden], p + "post_attention_layernorm.weight": [hidden]}


def model_shapes(gb: float, dims: dict) -> tuple[dict[str, list[int]], int, int]:
    """Qwen2 tensor names and shapes totalling about `gb` GB in fp32; returns (shapes, layers, vocab)."""
    target, hidden = gb * 1e9, dims["hidden"]
    # a fixed vocabulary keeps every tensor shape the same across sizes: only the layer count grows
    vocab = max(min(1024, dims["vocab"]), min(dims["vocab"], int(target * 0.5 / (8 * hidden)) // 128 * 128))
    per_layer = sum(torch.Size(s).numel() for s in layer_shapes(0, dims).values()) * 4
    layers = max(1, round((target - 8 * vocab * hidden) / per_layer))
    shapes = {"model.embed_tokens.weight": [vocab, hidden]}
    for i in range(layers):
        shapes.update(layer_shapes(i, dims))
    shapes |= {"model.norm.weight": [hidden], "lm_head.weight": [vocab, hidden]}
    return shapes, layers, vocab


def write_checkpoint(path: Path, shapes, layers: int, vocab: int, seed: int, shard_bytes: int, dims: dict) -> None:
    path.mkdir(parents=True)
    gen = torch.Generator().manual_seed(seed)
    weight_map, shard, size, total, n = {}, {}, 0, 0, 0

    def flush():
        nonlocal shard, size, n
        n += 1
        save_file(shard, path / f"model-{n:05d}.safetensors", metadata={"format": "pt"})
        weight_map.update({name: f"model-{n:05d}.safetensors" for name in shard})
        shard, size = {}, 0

    for name, shape in shapes.items():
        t = torch.randn(shape, generator=gen) * 0.02
        if shard and size + t.nbytes > shard_bytes:
            flush()
        shard[name], size, total = t, size + t.nbytes, total + t.nbytes
    flush()
    (path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))
    config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": dims["hidden"],
              "intermediate_size": dims["intermediate"], "num_attention_heads": dims["heads"],
              "num_key_value_heads": dims["kv_heads"],
              "num_hidden_layers": layers, "vocab_size": vocab, "max_position_embeddings": 4096,
              "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "float32"}
    (path / "config.json").write_text(json.dumps(config, indent=2))


def measure(cmd: list[str], log: Path) -> tuple[float, float, float]:
    """Wall s, peak RSS MB and CPU s (user + sys) of one command, from /usr/bin/time: a child forked by
    this (large) process would report its RSS high-water mark. CPU time is the figure that survives a
    busy shared machine; wall time is what a user waits."""
    os.sync()  # earlier runs' dirty pages must not be written back on this run's clock
    stats = log.with_suffix(".time")
    with open(log, "ab") as err:
        start = time.perf_counter()
        code = subprocess.call(["/usr/bin/time", "-f", "%M %U %S", "-o", str(stats), *cmd], stdout=err, stderr=err,
                               env={**os.environ, "HF_HUB_OFFLINE": "1"})
        wall = time.perf_counter() - start
    if code:
        sys.exit(f"failed ({code}): {' '.join(cmd)}; see {log}")
    rss_kb, user, system = stats.read_text().split()[-3:]
    return wall, int(rss_kb) / 1024, float(user) + float(system)


def timed(cmd, log, repeat, cleanup) -> tuple[float, float, float]:
    """The fastest of `repeat` runs (its RSS and CPU with it)."""
    runs = []
    for _ in range(repeat):
        runs.append(measure(cmd, log))
        cleanup()
    return min(runs)


def bench_size(work: Path, gb: float, args) -> tuple[int, dict]:
    shapes, layers, vocab = model_shapes(gb, args.dims)
    a, b, out = work / "A", work / "B", work / "out"
    t = time.perf_counter()
    write_checkpoint(a, shapes, layers, vocab, 0, args.shard_bytes, args.dims)
    write_checkpoint(b, shapes, layers, vocab, 1, args.shard_bytes, args.dims)
    size = sum(f.stat().st_size for f in a.glob("*.safetensors"))
    print(f"{size / 1e9:.2f} GB per model ({layers} layers, vocab {vocab}, "
          f"{len(list(a.glob('*.safetensors')))} shards); generated in {time.perf_counter() - t:.0f} s", flush=True)
    log, shard, n = work / "runs.log", str(args.shard_bytes), len(GRID)

    def clean():
        shutil.rmtree(out, ignore_errors=True)

    def floor(k):  # every run sees a warm page cache, as the floor does
        writes = "; ".join(f"cat {a}/*.safetensors > {out}/{i}" for i in range(k))
        return ["bash", "-c", f"mkdir -p {out}; cat {a}/*.safetensors {b}/*.safetensors > /dev/null; {writes}"]

    ewa = [str(BIN / "ewa"), "merge", str(a), str(b), "--device", "cpu", "--max-shard-size", shard]
    ewa_one = ewa + ["--alpha", str(ONE_ALPHA), "--out", str(out / "ewa")]
    cfg = work / "mergekit.yml"
    cfg.write_text(json.dumps({"merge_method": "linear", "parameters": {"normalize": False}, "dtype": "float32",
                               "models": [{"model": str(a), "parameters": {"weight": 1 - ONE_ALPHA}},
                                          {"model": str(b), "parameters": {"weight": ONE_ALPHA}}]}))
    mergekit = [str(BIN / "mergekit-yaml"), str(cfg), str(out / "mergekit"), "--out-shard-size", shard,
                "--no-copy-tokenizer"]
    subprocess.run(floor(0), check=True)
    r = {"startup": timed([sys.executable, "-c", "import ewa.merge.stream"], log, args.repeat, clean),
         "floor 1": timed(floor(1), log, args.repeat, clean),
         "ewa 1": measure(ewa_one, log), "mergekit 1": measure(mergekit, log)}
    for name in ("lm_head.weight", "model.layers.0.mlp.down_proj.weight"):  # both computed the same thing
        ours, theirs = ({k: v for p in (out / d).glob("*.safetensors") for k, v in load_file(p).items() if k == name}
                        for d in ("ewa", "mergekit"))
        torch.testing.assert_close(ours[name], theirs[name], rtol=1e-5, atol=1e-6)
    clean()
    if args.repeat > 1:
        r["ewa 1"] = min(r["ewa 1"], timed(ewa_one, log, args.repeat - 1, clean))
        r["mergekit 1"] = min(r["mergekit 1"], timed(mergekit, log, args.repeat - 1, clean))
    r[f"floor {n}"] = timed(floor(n), log, args.repeat, clean)
    r[f"ewa {n}"] = timed(ewa + ["--alphas", *map(str, GRID), "--out-pattern", f"{out}/{{alpha}}"],
                          log, args.repeat, clean)
    shutil.rmtree(a), shutil.rmtree(b)
    return size, r


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gb", type=float, default=1.0, help="larger model size; peak RSS is also measured at half")
    p.add_argument("--shard-mb", type=int, default=256, help="input and output shard size (both tools)")
    p.add_argument("--repeat", type=int, default=1, help="runs per cheap measurement (min wall time)")
    p.add_argument("--work", default="benchmarks/out/merge")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--smoke", action="store_true", help="one tiny size of narrow tensors (checks the benchmark runs)")
    args = p.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    args.dims = SMOKE_DIMS if args.smoke else DIMS
    args.shard_bytes = args.shard_mb * 1_000_000
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    print(f"ewa merge vs mergekit-yaml vs I/O floor; CPU, warm page cache, {args.shard_mb} MB shards, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    try:
        sizes = {}
        for gb in (args.gb,) if args.smoke else (args.gb / 2, args.gb):
            sizes[gb] = bench_size(work / f"{gb:g}GB", gb, args)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    n = len(GRID)
    labels = {"startup": "python + torch import (part of ewa)", "floor 1": "I/O floor, 1 alpha (cat)",
              "ewa 1": "ewa merge, 1 alpha", "mergekit 1": "mergekit-yaml, 1 alpha",
              f"floor {n}": f"I/O floor, {n} alphas (cat)", f"ewa {n}": f"ewa merge, {n} alphas, one pass"}
    print(f"\n{'model':>7} {'run':<36} {'wall s':>7} {'CPU s':>6} {'peak RSS MB':>12}")
    for size, r in sizes.values():
        for key, label in labels.items():
            wall, rss, cpu = r[key]
            print(f"{size / 1e9:>5.2f}GB {label:<36} {wall:>7.2f} {cpu:>6.2f} {rss:>12.0f}")
    print(f"\nratios: wall (CPU)   [target]; load average now {os.getloadavg()[0]:.1f}")
    for size, r in sizes.values():
        def ratio(x, y):
            return f"{r[x][0] / r[y][0]:.2f}x ({r[x][2] / r[y][2]:.2f}x)"
        gb = f"{size / 1e9:.2f} GB"
        print(f"  {gb}: 1 alpha, mergekit / ewa = {ratio('mergekit 1', 'ewa 1')}   [>= 4x]")
        print(f"  {gb}: {n} alphas, ewa / I/O floor = {ratio(f'ewa {n}', f'floor {n}')}   [<= 1.5x]; "
              f"less ewa's startup: {(r[f'ewa {n}'][0] - r['startup'][0]) / r[f'floor {n}'][0]:.2f}x")
        print(f"  {gb}: {n} alphas, {n} mergekit runs (est. {n} x 1 alpha) / ewa one pass = "
              f"{n * r['mergekit 1'][0] / r[f'ewa {n}'][0]:.1f}x")
        print(f"  {gb}: peak RSS, ewa / mergekit = {r['ewa 1'][1] / r['mergekit 1'][1]:.2f}   [< 1]")
    if len(sizes) < 2:
        print("  peak RSS growth: skipped (--smoke measures one size)")
        return
    (small, rs), (large, rl) = sizes.values()
    print(f"  peak RSS growth {small / 1e9:.2f} -> {large / 1e9:.2f} GB: ewa 1 alpha {rl['ewa 1'][1] / rs['ewa 1'][1]:.2f}x, "
          f"ewa {n} alphas {rl[f'ewa {n}'][1] / rs[f'ewa {n}'][1]:.2f}x, mergekit {rl['mergekit 1'][1] / rs['mergekit 1'][1]:.2f}x"
          f"   [ewa flat, ~1.0x]")


if __name__ == "__main__":
    main()
