"""Alpha-grid merges on pico Qwen2 checkpoints: exact formula, mergekit agreement, loadability, errors."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

from ewa.alphas import ALPHA_TAG_PATTERN, alpha_tag
from ewa.checkpoint import INDEX_FILE, fingerprint, read_checkpoint
from ewa.cli import main as ewa_main
from ewa.errors import UserError
from ewa.merge import MergeError, merge_linear, merge_task_arithmetic, parse_size
from ewa.merge.stream import resolve_device

GRID = [-1.0, 0.0, 0.5, 1.0, 2.0]
SHARD = 40_000  # bytes: splits a ~110 KB fp32 pico model into several shards
VARIANTS = {  # name -> (dtype, tie_word_embeddings, max_shard_size at save time)
    "fp32": (torch.float32, False, None),
    "bf16_tied": (torch.bfloat16, True, None),
    "fp32_sharded": (torch.float32, False, "40KB"),
}


def make_pico(path: Path, seed: int, dtype=torch.float32, tie=False, max_shard_size=None, intermediate=64) -> Path:
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=128, hidden_size=32, intermediate_size=intermediate, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=tie)
    model = Qwen2ForCausalLM(config).to(dtype)
    kwargs = {"max_shard_size": max_shard_size} if max_shard_size else {}
    model.save_pretrained(path, **kwargs)
    return path


def tensors(model_dir: Path) -> dict[str, torch.Tensor]:
    out = {}
    for file in sorted(Path(model_dir).glob("*.safetensors")):
        out.update(load_file(file))
    return out


def rewrite(src: Path, dst: Path, edit) -> Path:
    """A copy of a single-file pico model with its state dict passed through `edit`."""
    shutil.copytree(src, dst)
    state = edit(load_file(dst / "model.safetensors"))
    save_file(state, dst / "model.safetensors", metadata={"format": "pt"})
    return dst


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("pico")
    out = {}
    for name, (dtype, tie, shard) in VARIANTS.items():
        out[name] = [make_pico(root / f"{name}-{seed}", seed, dtype, tie, shard) for seed in range(2)]
    out["extra"] = [make_pico(root / f"extra-{seed}", seed) for seed in (2, 3)]  # endpoints C, D (fp32)
    assert len(list(out["fp32_sharded"][0].glob("*.safetensors"))) > 1  # the index path is exercised
    a = out["fp32"][0]
    from tokenizers import Tokenizer, models as tok_models
    Tokenizer(tok_models.WordLevel({"<unk>": 0, "def": 1}, unk_token="<unk>")).save(str(a / "tokenizer.json"))
    torch.save({"step": 1}, a / "optimizer.pt")  # training state must not follow the weights
    return out


@pytest.fixture(scope="session", params=list(VARIANTS))
def grid(request, models, tmp_path_factory):
    """(A, B, {alpha: merged dir}) for the alpha grid, produced by one merge_linear call."""
    a, b = models[request.param]
    root = tmp_path_factory.mktemp(f"merged-{request.param}")
    outs = [root / alpha_tag(alpha) for alpha in GRID]
    merge_linear(a, b, GRID, outs, device="cpu", max_shard_bytes=SHARD, progress=False)
    return a, b, dict(zip(GRID, outs))


def test_grid_matches_formula_and_endpoints_are_exact(grid):
    a_dir, b_dir, merged = grid
    a, b = tensors(a_dir), tensors(b_dir)
    for alpha, out_dir in merged.items():
        out = tensors(out_dir)
        assert out.keys() == a.keys()
        for name, t in out.items():
            assert t.dtype == a[name].dtype, name
            if alpha == 0:
                assert torch.equal(t, a[name]), name
            elif alpha == 1:
                assert torch.equal(t, b[name]), name
            else:
                ref = ((1 - alpha) * a[name].float() + alpha * b[name].float()).to(t.dtype)
                torch.testing.assert_close(t, ref, rtol=1e-5, atol=1e-6, msg=name) if t.dtype == torch.float32 \
                    else torch.testing.assert_close(t, ref, msg=name)
    assert not torch.equal(tensors(merged[2.0])["model.embed_tokens.weight"], b["model.embed_tokens.weight"])


def test_output_shards_and_index(grid):
    _, _, merged = grid
    out_dir = merged[0.5]
    index = json.loads((out_dir / INDEX_FILE).read_text())  # ~110 KB (fp32) / 55 KB (bf16) > 40 KB shards
    files = sorted(p.name for p in out_dir.glob("*.safetensors"))
    assert sorted(set(index["weight_map"].values())) == files and len(files) >= 2
    assert all(re.fullmatch(rf"model-\d{{5}}-of-{len(files):05d}\.safetensors", f) for f in files)
    out = tensors(out_dir)
    assert index["weight_map"].keys() == out.keys()
    assert index["metadata"]["total_size"] == sum(t.numel() * t.element_size() for t in out.values())
    assert all(p.stat().st_size < SHARD + 4096 for p in out_dir.glob("*.safetensors"))


def test_merged_model_loads_and_generates(grid):
    a_dir, _, merged = grid
    out_dir = merged[2.0]  # extrapolated
    model = AutoModelForCausalLM.from_pretrained(out_dir)
    on_disk = tensors(out_dir)
    state = model.state_dict()
    for name, t in on_disk.items():
        assert torch.equal(state[name], t), name  # the weights were loaded, not freshly initialised
    if model.config.tie_word_embeddings:
        assert "lm_head.weight" not in on_disk
        assert torch.equal(model.get_output_embeddings().weight, model.get_input_embeddings().weight)
    out = model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=5, do_sample=False)
    assert out.shape == (1, 8)


def test_record_and_copied_files(grid):
    a_dir, b_dir, merged = grid
    records = {alpha: json.loads((d / "ewa_merge.json").read_text()) for alpha, d in merged.items()}
    for alpha, rec in records.items():
        assert rec["method"] == "linear" and rec["alpha"] == alpha
        assert rec["exact_copy_of"] == {0.0: "A", 1.0: "B"}.get(alpha)
        assert rec["inputs"]["A"]["path"] == str(a_dir.resolve())
        assert rec["inputs"]["B"]["path"] == str(b_dir.resolve())
        assert {"torch", "safetensors", "ewa"} <= rec["versions"].keys()
        assert rec["config"]["device"] == "cpu"
    files_a, files_b = records[0.5]["inputs"]["A"]["files"], records[0.5]["inputs"]["B"]["files"]
    assert [f["sha256"] for f in files_a.values()] != [f["sha256"] for f in files_b.values()]
    source = {p.name for p in a_dir.iterdir()}
    copied = {p.name for p in merged[0.5].iterdir()}
    assert {"config.json", "generation_config.json"} <= copied
    assert ("tokenizer.json" in source) == ("tokenizer.json" in copied)
    assert "optimizer.pt" not in copied
    assert (merged[0.5] / "config.json").read_text() == (a_dir / "config.json").read_text()


def test_matches_mergekit_linear(models, tmp_path):
    mergekit_merge = pytest.importorskip("mergekit.merge")
    from mergekit.config import MergeConfiguration
    from mergekit.options import MergeOptions

    a_dir, b_dir = models["fp32"]
    alphas = [-1.0, 2.0]
    ours = merge_linear(a_dir, b_dir, alphas, [tmp_path / alpha_tag(x) for x in alphas], device="cpu",
                        progress=False)
    for alpha, our_dir in zip(alphas, ours):
        config = MergeConfiguration.model_validate({
            "merge_method": "linear", "parameters": {"normalize": False}, "dtype": "float32",
            "models": [{"model": str(a_dir), "parameters": {"weight": 1 - alpha}},
                       {"model": str(b_dir), "parameters": {"weight": alpha}}]})
        theirs_dir = tmp_path / f"mergekit{alpha_tag(alpha)}"
        mergekit_merge.run_merge(config, str(theirs_dir), MergeOptions(copy_tokenizer=False, quiet=True,
                                                                         write_model_card=False))
        ours_t, theirs = tensors(our_dir), tensors(theirs_dir)
        assert ours_t.keys() == theirs.keys()
        for name in ours_t:
            torch.testing.assert_close(ours_t[name], theirs[name], rtol=1e-5, atol=1e-6, msg=name)


def test_general_form_three_endpoints(models, tmp_path):
    base, b = models["fp32"]
    endpoints = [b, *models["extra"]]
    sets = [[0.5, -0.3, 1.2], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.5, 0.0, 0.0]]
    outs = merge_task_arithmetic(base, endpoints, sets, [tmp_path / str(i) for i in range(len(sets))],
                                 device="cpu", progress=False)
    theta = [tensors(d) for d in (base, *endpoints)]
    for cs, out_dir in zip(sets, outs):
        out = tensors(out_dir)
        for name, t in out.items():
            ref = theta[0][name] + sum(c * (e[name] - theta[0][name]) for c, e in zip(cs, theta[1:]))
            torch.testing.assert_close(t, ref, rtol=1e-5, atol=1e-6, msg=name)
    assert all(torch.equal(tensors(outs[1])[n], t) for n, t in theta[0].items())
    assert all(torch.equal(tensors(outs[2])[n], t) for n, t in theta[2].items())
    assert json.loads((outs[2] / "ewa_merge.json").read_text())["exact_copy_of"] == "endpoint 1"


def test_integer_buffers_are_copied_and_odd_shapes_blended(models, tmp_path):
    a_dir, b_dir = models["fp32"]
    step = {"model.ewa_step": torch.tensor([7, 8], dtype=torch.int64), "model.ewa_mask": torch.tensor([True, False]),
            "model.ewa_empty": torch.zeros(0, 3)}
    a2 = rewrite(a_dir, tmp_path / "a", lambda s: {**s, **step, "model.ewa_scale": torch.tensor(2.0)})
    b2 = rewrite(b_dir, tmp_path / "b", lambda s: {**s, **step, "model.ewa_scale": torch.tensor(4.0)})
    (out,) = merge_linear(a2, b2, [1.5], [tmp_path / "out"], device="cpu", progress=False)
    merged = tensors(out)
    assert torch.equal(merged["model.ewa_step"], step["model.ewa_step"])
    assert torch.equal(merged["model.ewa_mask"], step["model.ewa_mask"])
    assert merged["model.ewa_empty"].shape == (0, 3)
    assert merged["model.ewa_scale"].shape == () and merged["model.ewa_scale"].item() == 5.0  # 2 + 1.5 * (4 - 2)


def device_pipeline_on_cpu(monkeypatch) -> None:
    """Merges take the GPU path's code (staging lanes, the side-stream structure, ring events), run on the
    CPU with ordinary memory: the only way the suite sees that code without a GPU."""
    import ewa.merge.stream
    from ewa.merge.blend import DeviceBlend

    monkeypatch.setattr(ewa.merge.stream, "blender_for", lambda device, writer: DeviceBlend(device, writer))


@pytest.mark.parametrize("path", ["host", "device pipeline"])
def test_tiny_blocks_and_ring_give_identical_files(grid, tmp_path, monkeypatch, path):
    """52-byte blocks (13 fp32 / 26 bf16 values: tensors end mid-block) through a ring of two buffers, so
    the blender keeps waiting on the writer and reuses buffers (and, on the device path, its two staging
    lanes): the files must be byte-identical to those written by the CPU with one block per tensor."""
    import ewa.merge.stream
    a_dir, b_dir, merged = grid
    monkeypatch.setattr(ewa.merge.stream, "CPU_BLOCKS", (52, 2))
    if path == "device pipeline":
        device_pipeline_on_cpu(monkeypatch)
    alphas = [-1.0, 0.5, 2.0]
    outs = merge_linear(a_dir, b_dir, alphas, [tmp_path / alpha_tag(a) for a in alphas], device="cpu",
                        max_shard_bytes=SHARD, progress=False)
    for alpha, out_dir in zip(alphas, outs):
        files = sorted(p.name for p in merged[alpha].glob("*.safetensors*"))
        assert files == sorted(p.name for p in out_dir.glob("*.safetensors*"))
        for file in files:
            assert (out_dir / file).read_bytes() == (merged[alpha] / file).read_bytes(), file


def test_general_form_through_the_device_pipeline_is_bitwise_the_host_path(models, tmp_path, monkeypatch):
    """Several terms per output (deltas shared across outputs), exact copies and blends side by side."""
    import ewa.merge.stream
    base, b = models["fp32"]
    endpoints = [b, *models["extra"]]
    sets = [[0.5, -0.3, 1.2], [0.0, 1.0, 0.0], [1.5, 0.0, 0.0], [-1.0, 2.0, 0.25]]

    def run(name):
        return merge_task_arithmetic(base, endpoints, sets, [tmp_path / name / str(i) for i in range(len(sets))],
                                     device="cpu", progress=False)

    host = run("host")
    monkeypatch.setattr(ewa.merge.stream, "CPU_BLOCKS", (1000, 3))
    device_pipeline_on_cpu(monkeypatch)
    for ours, theirs in zip(run("device"), host):
        files = sorted(p.name for p in theirs.glob("*.safetensors"))
        assert files and files == sorted(p.name for p in ours.glob("*.safetensors"))
        assert all((ours / f).read_bytes() == (theirs / f).read_bytes() for f in files)


NO_MODEL_CLASSES = """
import sys
from ewa.errors import UserError
from ewa.merge import merge_linear
a, b, broken_a, broken_b, out = sys.argv[1:]
merge_linear(a, b, [0.5], [out + "/good"], device="cpu", progress=False)
try:
    merge_linear(broken_a, broken_b, [0.5], [out + "/bad"], device="cpu", progress=False)
except UserError as e:
    print(e)
print("transformers imported:", "transformers" in sys.modules)
"""


def test_a_merge_of_a_known_config_imports_no_model_class(models, tmp_path, monkeypatch):
    """Importing transformers' model classes takes seconds, more than a small merge: the tensors a config
    asks for are kept in EWA_CACHE_DIR after the first merge of that config, and later merges (another
    process) check against them without importing transformers, refusing what they refused before."""
    import subprocess
    import sys

    monkeypatch.setenv("EWA_CACHE_DIR", str(tmp_path / "cache"))
    a_dir, b_dir = models["bf16_tied"]
    name = "model.layers.1.self_attn.o_proj.weight"
    drop = lambda s: {k: v for k, v in s.items() if k != name}  # noqa: E731  both inputs miss it: they agree
    broken = [rewrite(d, tmp_path / f"broken-{d.name}", drop) for d in (a_dir, b_dir)]
    merge_linear(a_dir, b_dir, [0.5], [tmp_path / "first"], device="cpu", progress=False)  # the cache is filled
    assert len(list((tmp_path / "cache" / "model-tensors").glob("*.json"))) == 1
    run = subprocess.run([sys.executable, "-c", NO_MODEL_CLASSES, str(a_dir), str(b_dir), *map(str, broken),
                          str(tmp_path / "out")], capture_output=True, text=True, check=True)
    lines = run.stdout.splitlines()
    assert re.fullmatch(rf"{re.escape(str(broken[0]))}/model\.safetensors: tensor '{re.escape(name)}' that "
                        rf"config\.json \(Qwen2ForCausalLM\) asks for is missing \(it would be initialised at random\)",
                        lines[0]), run.stdout
    assert lines[1] == "transformers imported: False"
    assert tensors(tmp_path / "out" / "good").keys() == tensors(tmp_path / "first").keys()
    assert not (tmp_path / "out" / "bad").exists()
    (cached,) = (tmp_path / "cache" / "model-tensors").glob("*.json")
    cached.write_text('{"source": "config.json (Qwen2ForCausalLM)", "shapes": [')  # cut short: built again
    with pytest.raises(UserError, match=re.escape(name)):
        merge_linear(*broken, [0.5], [tmp_path / "again"], device="cpu", progress=False)
    assert json.loads(cached.read_text())["shapes"][name] == [32, 32]


def test_tied_embeddings_stored_twice_stay_tied(models, tmp_path):
    a_dir, b_dir = models["bf16_tied"]
    tie = lambda s: {**s, "lm_head.weight": s["model.embed_tokens.weight"].clone()}  # noqa: E731
    a2, b2 = rewrite(a_dir, tmp_path / "a", tie), rewrite(b_dir, tmp_path / "b", tie)
    (out,) = merge_linear(a2, b2, [1.5], [tmp_path / "out"], device="cpu", progress=False)
    merged = tensors(out)
    assert torch.equal(merged["lm_head.weight"], merged["model.embed_tokens.weight"])
    assert not torch.equal(merged["lm_head.weight"], tensors(b2)["lm_head.weight"])


def _differs_int(models, tmp_path):
    a_dir, b_dir = models["fp32"]
    a2 = rewrite(a_dir, tmp_path / "a", lambda s: {**s, "model.ewa_step": torch.tensor([7])})
    b2 = rewrite(b_dir, tmp_path / "b", lambda s: {**s, "model.ewa_step": torch.tensor([9])})
    return a2, b2, r"tensor 'model\.ewa_step' \(torch\.int64\) differs between"


def _shape(models, tmp_path):
    return models["fp32"][0], make_pico(tmp_path / "wide", 1, intermediate=48), \
        r"tensor 'model\.layers\.0\.mlp\.\w+_proj\.weight': shape \[\d+, \d+\] in .* but \[\d+, \d+\] in .*wide"


def _missing(models, tmp_path):
    name = "model.layers.1.self_attn.o_proj.weight"
    b2 = rewrite(models["fp32"][1], tmp_path / "b", lambda s: {k: v for k, v in s.items() if k != name})
    return models["fp32"][0], b2, rf"tensor '{re.escape(name)}' is in .* but missing from .*/b$"


def _dtype(models, tmp_path):
    b2 = rewrite(models["fp32"][1], tmp_path / "b", lambda s: {k: v.bfloat16() for k, v in s.items()})
    return models["fp32"][0], b2, r"tensor '.+': dtype F32 in .* but BF16 in .*/b$"


def _no_dir(models, tmp_path):
    return models["fp32"][0], tmp_path / "nope", r"/nope: model directory not found"


def _no_weights(models, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text("{}")
    return models["fp32"][0], tmp_path / "empty", r"/empty: no model\.safetensors or model\.safetensors\.index\.json"


def _bad_index(models, tmp_path):
    bad = shutil.copytree(models["fp32_sharded"][1], tmp_path / "bad")
    (bad / INDEX_FILE).write_text("{not json")
    return models["fp32_sharded"][0], bad, r"/bad/model\.safetensors\.index\.json: malformed index"


def _lost_shard(models, tmp_path):
    bad = shutil.copytree(models["fp32_sharded"][1], tmp_path / "bad")
    victim = sorted(bad.glob("*.safetensors"))[-1]
    victim.unlink()
    return models["fp32_sharded"][0], bad, rf"{re.escape(victim.name)}: shard listed in .* is missing"


def _not_safetensors(models, tmp_path):
    bad = shutil.copytree(models["fp32"][1], tmp_path / "bad")
    (bad / "model.safetensors").write_bytes(b"\x00" * 64)
    return models["fp32"][0], bad, r"/bad/model\.safetensors: not a readable safetensors file"


@pytest.mark.parametrize("case", [_differs_int, _shape, _missing, _dtype, _no_dir, _no_weights, _bad_index,
                                  _lost_shard, _not_safetensors])
def test_bad_inputs_fail_naming_the_culprit_and_leave_nothing(models, tmp_path, case, capsys):
    a_dir, b_dir, pattern = case(models, tmp_path)
    results = tmp_path / "results"
    with pytest.raises(UserError, match=pattern):  # MergeError, or CheckpointError for what cannot be read
        merge_linear(a_dir, b_dir, [0.5, 1.5], [results / "x", results / "y"], device="cpu", progress=False)
    assert not results.exists() or list(results.iterdir()) == []  # no output, no temp directory
    code = ewa_main(["merge", str(a_dir), str(b_dir), "--alpha", "0.5", "--out", str(results / "z"), "--device", "cpu"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and re.search(pattern, err[-1]) and err[-1].startswith("ewa merge: error:")
    assert not (results / "z").exists()


def test_cli_single_and_grid(models, tmp_path, capsys):
    a_dir, b_dir = models["fp32_sharded"]
    assert ewa_main(["merge", str(a_dir), str(b_dir), "--alphas", "-0.5", "1.5", "--out-pattern",
                     f"{tmp_path}/grid/{{alpha}}", "--device", "cpu", "--max-shard-size", "40KB"]) == 0
    assert sorted(p.name for p in (tmp_path / "grid").iterdir()) == ["+1.50", "-0.50"]
    assert ewa_main(["merge", str(a_dir), str(b_dir), "--alpha", "-0.5", "--out", str(tmp_path / "one"),
                     "--hash", "full"]) == 0
    record = json.loads((tmp_path / "one" / "ewa_merge.json").read_text())
    assert record["inputs"]["B"]["hash"] == "full" and record["alpha"] == -0.5
    first = sorted(b_dir.glob("*.safetensors"))[0]
    assert record["inputs"]["B"]["files"][first.name]["sha256"] == hashlib.sha256(first.read_bytes()).hexdigest()
    one, from_grid = tensors(tmp_path / "one"), tensors(tmp_path / "grid" / "-0.50")
    a, b = tensors(a_dir), tensors(b_dir)
    for name, t in one.items():
        assert torch.equal(t, from_grid[name]), name  # shard size and grid size do not change the numbers
        torch.testing.assert_close(t, 1.5 * a[name] - 0.5 * b[name], rtol=1e-5, atol=1e-6)
    assert (tmp_path / "one" / "model.safetensors").is_file()  # under the default shard size: one file
    capsys.readouterr()
    assert ewa_main(["merge", str(a_dir), str(b_dir), "--alphas", "0.5", "--out", str(tmp_path / "z")]) == 2
    assert "--out-pattern" in capsys.readouterr().err
    with pytest.raises(MergeError, match="overlaps an input"):
        merge_linear(a_dir, b_dir, [0.5], [a_dir], device="cpu", progress=False)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_chunk_merged_in_one_pass_equals_one_merge_per_alpha(models, variant, tmp_path):
    """A profile's merge chunk (rules/merge.smk: `ewa merge --alphas ... --out-pattern`, both checkpoints read
    once) writes the same models, tensor by tensor and shard by shard, as one `ewa merge --alpha A --out`
    per alpha, the default."""
    a_dir, b_dir = models[variant]
    common = ["--device", "cpu", "--max-shard-size", "40KB"]
    assert ewa_main(["merge", str(a_dir), str(b_dir), "--alphas", *map(repr, GRID), "--out-pattern",
                     f"{tmp_path}/chunk/alpha{{alpha}}", *common]) == 0
    for alpha in GRID:
        one, chunk = tmp_path / "one" / f"alpha{alpha_tag(alpha)}", tmp_path / "chunk" / f"alpha{alpha_tag(alpha)}"
        assert ewa_main(["merge", str(a_dir), str(b_dir), "--alpha", repr(alpha), "--out", str(one), *common]) == 0
        shards = sorted(p.name for p in one.glob("*.safetensors"))
        assert shards == sorted(p.name for p in chunk.glob("*.safetensors")) and shards
        x, y = tensors(one), tensors(chunk)
        assert x.keys() == y.keys()
        for name in x:
            assert x[name].dtype == y[name].dtype and torch.equal(x[name], y[name]), (alpha, name)
        assert json.loads((one / "config.json").read_text()) == json.loads((chunk / "config.json").read_text())


def test_fingerprint_sees_content(models, tmp_path):
    a_dir, _ = models["fp32"]
    copy = shutil.copytree(a_dir, tmp_path / "copy")
    assert fingerprint(read_checkpoint(copy))["files"] == fingerprint(read_checkpoint(a_dir))["files"]
    edited = rewrite(a_dir, tmp_path / "edited", lambda s: {k: v * 1.01 for k, v in s.items()})
    assert fingerprint(read_checkpoint(edited))["files"] != fingerprint(read_checkpoint(a_dir))["files"]
    full = fingerprint(read_checkpoint(a_dir), "full")["files"]["model.safetensors"]["sha256"]
    assert full == hashlib.sha256((a_dir / "model.safetensors").read_bytes()).hexdigest()


def test_alpha_tag_and_sizes():
    assert [alpha_tag(x) for x in (0.5, -1, 0, -0.0, 2, 0.1 + 0.2, -0.25)] == \
        ["+0.50", "-1.00", "+0.00", "+0.00", "+2.00", "+0.30", "-0.25"]
    assert all(re.fullmatch(ALPHA_TAG_PATTERN, alpha_tag(x)) and float(alpha_tag(x)) == x for x in GRID)
    for bad in (0.125, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="alpha"):
            alpha_tag(bad)
    assert (parse_size("2GB"), parse_size("40KB"), parse_size("1GiB"), parse_size(123)) == (2e9, 40_000, 2**30, 123)
    with pytest.raises(ValueError, match="max shard size"):
        parse_size("lots")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only fallback")
def test_device_resolution_without_cuda():
    assert resolve_device("auto") == "cpu"
    with pytest.raises(MergeError, match="no CUDA device"):
        resolve_device("cuda")
