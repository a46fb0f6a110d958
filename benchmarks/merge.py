"""Speed and peak memory of `ewa merge` against a plain streamed safetensors loop, mergekit-yaml (linear,
normalize: false) and the node's copy floor (`cat` the same bytes through the page cache: read A and B
once, write one model's bytes per alpha), on synthetic Qwen2-shaped checkpoints; the alpha grid on every
device at hand (cpu, and cuda where torch sees one), with GB/s against the floor's.

    .venv/bin/python benchmarks/merge.py --gb 1          # sizes 0.5 and 1 GB of bf16; ~3-4 min on 2 cores
    .venv/bin/python benchmarks/merge.py --smoke         # one ~2 MB size of narrow tensors: checks it runs
"""
from __future__ import annotations

import argparse
import filecmp
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
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
# The baseline a merge is "within 1.1x of": what anyone would write first. Each output shard is built in
# memory from one input shard of A and of B, one tensor at a time, and saved with safetensors.
PLAIN_LOOP = """
import json, shutil, sys
from pathlib import Path
import torch
from safetensors import safe_open
from safetensors.torch import save_file
a, b, alpha, out = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]), Path(sys.argv[4])
out.mkdir(parents=True)
index = json.loads((a / "model.safetensors.index.json").read_text())
for shard in dict.fromkeys(index["weight_map"].values()):
    merged = {}
    with safe_open(a / shard, "pt") as fa, safe_open(b / shard, "pt") as fb:
        for name in fa.keys():
            x = fa.get_tensor(name)
            merged[name] = torch.lerp(x.float(), fb.get_tensor(name).float(), alpha).to(x.dtype)
    save_file(merged, out / shard, metadata={"format": "pt"})
(out / "model.safetensors.index.json").write_text(json.dumps(index))
shutil.copy(a / "config.json", out / "config.json")
"""


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


def model_shapes(gb: float, dims: dict, itemsize: int = 4) -> tuple[dict[str, list[int]], int, int]:
    """Qwen2 tensor names and shapes totalling about `gb` GB at `itemsize` bytes per value; returns (shapes,
    layers, vocab)."""
    target, hidden = gb * 1e9 * 4 / itemsize, dims["hidden"]  # in fp32 bytes
    # a fixed vocabulary keeps every tensor shape the same across sizes: only the layer count grows
    vocab = max(min(1024, dims["vocab"]), min(dims["vocab"], int(target * 0.5 / (8 * hidden)) // 128 * 128))
    per_layer = sum(torch.Size(s).numel() for s in layer_shapes(0, dims).values()) * 4
    layers = max(1, round((target - 8 * vocab * hidden) / per_layer))
    shapes = {"model.embed_tokens.weight": [vocab, hidden]}
    for i in range(layers):
        shapes.update(layer_shapes(i, dims))
    shapes |= {"model.norm.weight": [hidden], "lm_head.weight": [vocab, hidden]}
    return shapes, layers, vocab


def write_checkpoint(path: Path, shapes, layers: int, vocab: int, seed: int, shard_bytes: int, dims: dict,
                     dtype: torch.dtype) -> None:
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
        t = (torch.randn(shape, generator=gen) * 0.02).to(dtype)
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
              "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False,
              "torch_dtype": str(dtype).removeprefix("torch.")}
    (path / "config.json").write_text(json.dumps(config, indent=2))


def measure(cmd: list[str], log: Path, env: dict | None = None) -> tuple[float, float, float]:
    """Wall s, peak RSS MB and CPU s (user + sys) of one command, from /usr/bin/time: a child forked by
    this (large) process would report its RSS high-water mark. CPU time is the figure that survives a
    busy shared machine; wall time is what a user waits."""
    os.sync()  # earlier runs' dirty pages must not be written back on this run's clock
    stats = log.with_suffix(".time")
    with open(log, "ab") as err:
        start = time.perf_counter()
        code = subprocess.call(["/usr/bin/time", "-f", "%M %U %S", "-o", str(stats), *cmd], stdout=err, stderr=err,
                               env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})
        wall = time.perf_counter() - start
    if code:
        sys.exit(f"failed ({code}): {' '.join(cmd)}; see {log}")
    rss_kb, user, system = stats.read_text().split()[-3:]
    return wall, int(rss_kb) / 1024, float(user) + float(system)


def timed(cmd, log, repeat, cleanup, env=None) -> tuple[float, float, float]:
    """The fastest of `repeat` runs (its RSS and CPU with it)."""
    runs = []
    for _ in range(repeat):
        runs.append(measure(cmd, log, env))
        cleanup()
    return min(runs)


def devices() -> list[str]:
    return ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


def same_files(x: Path, y: Path) -> bool:
    """Every weight file of two model directories byte for byte (the merge records differ: device)."""
    names = sorted(p.name for p in x.glob("*.safetensors*"))
    return names == sorted(p.name for p in y.glob("*.safetensors*")) and all(
        filecmp.cmp(x / n, y / n, shallow=False) for n in names)


def bench_size(work: Path, gb: float, args) -> tuple[int, dict]:
    shapes, layers, vocab = model_shapes(gb, args.dims, DTYPES[args.dtype].itemsize)
    a, b, out = work / "A", work / "B", work / "out"
    t = time.perf_counter()
    write_checkpoint(a, shapes, layers, vocab, 0, args.shard_bytes, args.dims, DTYPES[args.dtype])
    write_checkpoint(b, shapes, layers, vocab, 1, args.shard_bytes, args.dims, DTYPES[args.dtype])
    size = sum(f.stat().st_size for f in a.glob("*.safetensors"))
    print(f"{size / 1e9:.2f} GB per model ({args.dtype}, {layers} layers, vocab {vocab}, "
          f"{len(list(a.glob('*.safetensors')))} shards); generated in {time.perf_counter() - t:.0f} s", flush=True)
    log, shard, n = work / "runs.log", str(args.shard_bytes), len(GRID)
    cache = {"EWA_CACHE_DIR": str(work / "cache")}  # ewa's cache of derived facts, cold for the first run

    def clean():
        shutil.rmtree(out, ignore_errors=True)

    def floor(k):  # every run sees a warm page cache, as the floor does
        writes = "; ".join(f"cat {a}/*.safetensors > {out}/{i}" for i in range(k))
        return ["bash", "-c", f"mkdir -p {out}; cat {a}/*.safetensors {b}/*.safetensors > /dev/null; {writes}"]

    def ewa(device):
        return [str(BIN / "ewa"), "merge", str(a), str(b), "--device", device, "--max-shard-size", shard]

    def ewa_one_on(device):
        return ewa(device) + ["--alpha", str(ONE_ALPHA), "--out", str(out / "ewa")]

    ewa_one = ewa_one_on("cpu")
    plain = [sys.executable, "-c", PLAIN_LOOP, str(a), str(b), str(ONE_ALPHA), str(out / "plain")]
    cfg = work / "mergekit.yml"
    cfg.write_text(json.dumps({"merge_method": "linear", "parameters": {"normalize": False}, "dtype": "float32",
                               "out_dtype": str(DTYPES[args.dtype]).removeprefix("torch."),
                               "models": [{"model": str(a), "parameters": {"weight": 1 - ONE_ALPHA}},
                                          {"model": str(b), "parameters": {"weight": ONE_ALPHA}}]}))
    mergekit = [str(BIN / "mergekit-yaml"), str(cfg), str(out / "mergekit"), "--out-shard-size", shard,
                "--no-copy-tokenizer"]
    subprocess.run(floor(0), check=True)
    r = {"startup": timed([sys.executable, "-c", "import ewa.merge.stream"], log, args.repeat, clean),
         "floor 1": timed(floor(1), log, args.repeat, clean)}
    r["ewa 1 cold"] = measure(ewa_one, log, cache)  # the first merge of this config: it fills the cache
    clean()
    r |= {"plain 1": measure(plain, log), "ewa 1": measure(ewa_one, log, cache), "mergekit 1": measure(mergekit, log)}
    for name in ("lm_head.weight", "model.layers.0.mlp.down_proj.weight"):  # all three computed the same thing
        ours, plain_t, theirs = ({k: v for p in (out / d).glob("*.safetensors") for k, v in load_file(p).items()
                                  if k == name} for d in ("ewa", "plain", "mergekit"))
        assert torch.equal(ours[name], plain_t[name]), name
        torch.testing.assert_close(ours[name], theirs[name], **({"rtol": 1e-5, "atol": 1e-6} if args.dtype == "fp32" else {}))
    clean()
    if args.repeat > 1:  # alternate the pair whose ratio is the target, so drift hits both alike
        for _ in range(args.repeat - 1):
            r["plain 1"] = min(r["plain 1"], timed(plain, log, 1, clean))
            r["ewa 1"] = min(r["ewa 1"], timed(ewa_one, log, 1, clean, cache))
        r["mergekit 1"] = min(r["mergekit 1"], timed(mergekit, log, args.repeat - 1, clean))
    for device in devices()[1:]:  # the card's start (CUDA context, pinned buffers) is part of one alpha
        r[f"ewa 1 {device}"] = timed(ewa_one_on(device), log, args.repeat, clean, cache)
    r[f"floor {n}"] = timed(floor(n), log, args.repeat, clean)
    grid = ["--alphas", *map(str, GRID), "--out-pattern", f"{out}/{{device}}/{{alpha}}"]
    for device in devices():
        run = ewa(device) + [x.replace("{device}", device) for x in grid]
        r[f"ewa {n} {device}"] = timed(run, log, args.repeat - 1, lambda: shutil.rmtree(out / device), cache) \
            if args.repeat > 1 else None
        shutil.rmtree(out / device, ignore_errors=True)
        best = measure(run, log, cache)  # the last run's outputs stay, for the comparison below
        r[f"ewa {n} {device}"] = min(x for x in (r[f"ewa {n} {device}"], best) if x is not None)
    if "cuda" in devices():
        r["cuda == cpu"] = all(same_files(out / "cuda" / d.name, out / "cpu" / d.name) for d in (out / "cpu").iterdir())
    clean()
    shutil.rmtree(a), shutil.rmtree(b)
    return size, r


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gb", type=float, default=1.0, help="larger model size; peak RSS is also measured at half")
    p.add_argument("--dtype", choices=list(DTYPES), default="bf16", help="the checkpoints' dtype (trained ones are bf16)")
    p.add_argument("--shard-mb", type=int, default=256, help="input and output shard size (all tools)")
    p.add_argument("--repeat", type=int, default=1, help="runs per measurement (min wall time)")
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
    gpu = f", GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ", no GPU"
    print(f"ewa merge vs a plain streamed loop vs mergekit-yaml vs the copy floor; warm page cache, {args.shard_mb} MB "
          f"shards, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores{gpu}")
    try:
        sizes = {}
        for gb in (args.gb,) if args.smoke else (args.gb / 2, args.gb):
            sizes[gb] = bench_size(work / f"{gb:g}GB", gb, args)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    n = len(GRID)
    labels = {"startup": "python + torch import (part of ewa)", "floor 1": "copy floor, 1 alpha (cat)",
              "plain 1": "plain streamed loop, 1 alpha", "ewa 1 cold": "ewa merge, 1 alpha, first of its config",
              "ewa 1": "ewa merge, 1 alpha", **{f"ewa 1 {d}": f"ewa merge, 1 alpha, {d}" for d in devices()[1:]},
              "mergekit 1": "mergekit-yaml, 1 alpha",
              f"floor {n}": f"copy floor, {n} alphas (cat)",
              **{f"ewa {n} {d}": f"ewa merge, {n} alphas, one pass, {d}" for d in devices()}}
    moved = {key: 2 + (n if key.startswith(("floor " + str(n), f"ewa {n}")) else 1) for key in labels}  # models
    print(f"\n{'model':>7} {'run':<42} {'wall s':>7} {'GB/s':>6} {'CPU s':>6} {'peak RSS MB':>12}")
    for size, r in sizes.values():
        for key, label in labels.items():
            wall, rss, cpu = r[key]
            rate = "" if key == "startup" else f"{moved[key] * size / 1e9 / wall:.2f}"
            print(f"{size / 1e9:>5.2f}GB {label:<42} {wall:>7.2f} {rate:>6} {cpu:>6.2f} {rss:>12.0f}")
    print(f"\nratios: wall (CPU)   [target]; GB/s counts both endpoints read and every model written; "
          f"load average now {os.getloadavg()[0]:.1f}")
    for size, r in sizes.values():
        def ratio(x, y):
            return f"{r[x][0] / r[y][0]:.2f}x ({r[x][2] / r[y][2]:.2f}x)"
        gb = f"{size / 1e9:.2f} GB"
        print(f"  {gb}: 1 alpha, ewa / plain streamed loop = {ratio('ewa 1', 'plain 1')}   [<= 1.1x]; "
              f"the first merge of a config on this machine: {ratio('ewa 1 cold', 'plain 1')}")
        for device in devices()[1:]:
            print(f"  {gb}: 1 alpha on {device}, ewa / plain streamed loop = {ratio(f'ewa 1 {device}', 'plain 1')}")
        print(f"  {gb}: 1 alpha, mergekit / ewa = {ratio('mergekit 1', 'ewa 1')}   [>= 4x]")
        for device in devices():
            print(f"  {gb}: {n} alphas on {device}, GB/s / the copy floor's = "
                  f"{r[f'floor {n}'][0] / r[f'ewa {n} {device}'][0]:.2f}   [>= 0.5]; "
                  f"less ewa's startup: {r[f'floor {n}'][0] / (r[f'ewa {n} {device}'][0] - r['startup'][0]):.2f}")
        if "cuda == cpu" in r:
            print(f"  {gb}: {n} alphas, GB/s cuda / cpu = {r[f'ewa {n} cpu'][0] / r[f'ewa {n} cuda'][0]:.2f}   [>= 1]; "
                  f"outputs bitwise identical: {r['cuda == cpu']}")
        print(f"  {gb}: {n} alphas, {n} mergekit runs (est. {n} x 1 alpha) / ewa one pass on cpu = "
              f"{n * r['mergekit 1'][0] / r[f'ewa {n} cpu'][0]:.1f}x")
        print(f"  {gb}: peak RSS, ewa / mergekit = {r['ewa 1'][1] / r['mergekit 1'][1]:.2f}   [< 1]")
    if len(sizes) < 2:
        print("  peak RSS growth: skipped (--smoke measures one size)")
        return
    (small, rs), (large, rl) = sizes.values()
    print(f"  peak RSS growth {small / 1e9:.2f} -> {large / 1e9:.2f} GB: ewa 1 alpha {rl['ewa 1'][1] / rs['ewa 1'][1]:.2f}x, "
          f"ewa {n} alphas {rl[f'ewa {n} cpu'][1] / rs[f'ewa {n} cpu'][1]:.2f}x, mergekit {rl['mergekit 1'][1] / rs['mergekit 1'][1]:.2f}x"
          f"   [ewa flat, ~1.0x]")
    if any(not r.get("cuda == cpu", True) for _, r in sizes.values()):
        sys.exit("the cuda merge's outputs differ from the cpu merge's")


if __name__ == "__main__":
    main()
