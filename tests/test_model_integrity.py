"""Models load whole or not at all, and merges cannot go silently wrong: a missing, unexpected or misshapen
tensor, a truncated shard or an invalid config.json is one line naming it under `ewa sample`, `ewa train`,
`ewa init` and `ewa merge`; merge inputs must share one architecture; a merge publishes only outputs that
read back whole, one writer at a time, and clears what a killed run left; a full disk is one line."""
from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

from helpers import PICO, REGIMES, sample_settings

from ewa.checkpoint import CheckpointError, check_loadable, check_loaded
from ewa.cli import main
from ewa.merge import MergeError, merge_linear
from ewa.problems import Problem, make_test, write_problems

DROPPED = "model.layers.1.self_attn.o_proj.weight"
EXTRA = "model.layers.2.mlp.up_proj.weight"  # the pico model has layers 0 and 1


@pytest.fixture(scope="session")
def problems_file(tmp_path_factory) -> Path:
    tests = tuple(make_test(f"{n}\n", str(2 * n), public=n == 1) for n in (1, 2, 3))
    problem = Problem(id="toy/double", source="toy", difficulty="easy", statement="Read n; print 2n.",
                      testtype="stdin", tests=tests)
    path = tmp_path_factory.mktemp("problems") / "train.jsonl"
    write_problems([problem], path)
    return path


@pytest.fixture(scope="session")
def pico(tmp_path_factory, problems_file) -> Path:
    """`ewa init` of the tiny Qwen2 (tied embeddings: lm_head.weight is not on disk), no SFT."""
    out = tmp_path_factory.mktemp("pico") / "init"
    config = {"seed": 0, "model": {"init": "tiny", "tiny": PICO, "sft": {"steps": 0}}}
    assert main(["init", "--config", json.dumps(config), "--problems", str(problems_file), "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["tie_word_embeddings"] is True
    return out


def edit_weights(model: Path, edit) -> None:
    save_file(edit(load_file(model / "model.safetensors")), model / "model.safetensors", metadata={"format": "pt"})


def edit_config(model: Path, edit) -> None:
    config = json.loads((model / "config.json").read_text())
    edit(config)
    (model / "config.json").write_text(json.dumps(config, indent=2))


def truncate(model: Path) -> None:
    data = (model / "model.safetensors").read_bytes()
    (model / "model.safetensors").write_bytes(data[:len(data) - 100])


# breakage -> (how, the pattern the one-line error must match)
BREAKAGES = {
    "missing": (lambda m: edit_weights(m, lambda s: {k: v for k, v in s.items() if k != DROPPED}),
                rf"/model\.safetensors: tensor '{re.escape(DROPPED)}' that config\.json \(Qwen2ForCausalLM\) asks "
                rf"for is missing \(it would be initialised at random\)"),
    "unexpected": (lambda m: edit_weights(m, lambda s: {**s, EXTRA: s["model.layers.0.mlp.up_proj.weight"].clone()}),
                   rf"/model\.safetensors: tensor '{re.escape(EXTRA)}' is not in config\.json"),
    "shape": (lambda m: edit_config(m, lambda c: c.update(intermediate_size=48)),
              r"/model\.safetensors: tensor 'model\.layers\.0\.mlp\.\w+_proj\.weight' has shape \[\d+, \d+\] but "
              r"config\.json \(Qwen2ForCausalLM\) makes it \[\d+, \d+\]"),
    "truncated": (truncate, r"/model\.safetensors: not a readable safetensors file"),
    "invalid_config": (lambda m: (m / "config.json").write_text('{"model_type": "qwen2",'),
                       r"/config\.json is not valid JSON"),
}


def broken(pico: Path, tmp_path: Path, breakage: str) -> Path:
    model = shutil.copytree(pico, tmp_path / f"broken-{breakage}")
    BREAKAGES[breakage][0](model)
    return model


def one_error_line(err: str, command: str) -> str:
    """The error line of a failed `ewa` command; fails on a traceback or an error spread over lines."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith(f"ewa {command}: error:")]
    assert len(lines) == 1, err
    return lines[0]


# --- loading: sample, train, init -------------------------------------------------------------------

def test_an_intact_model_passes_with_its_tied_head_absent(pico):
    ckpt = check_loadable(pico, "--model")
    assert "lm_head.weight" not in ckpt.specs and "model.embed_tokens.weight" in ckpt.specs
    check_loaded(AutoModelForCausalLM.from_pretrained(pico), pico)


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_check_loadable_names_tensor_and_file(pico, tmp_path, breakage):
    model = broken(pico, tmp_path, breakage)
    with pytest.raises(CheckpointError, match=f"^--model: {re.escape(str(model))}{BREAKAGES[breakage][1]}") as e:
        check_loadable(model, "--model")
    assert "\n" not in str(e.value)


def test_transformers_fills_a_missing_tensor_at_random_and_the_loaded_check_sees_it(pico, tmp_path):
    model = broken(pico, tmp_path, "missing")
    loaded = AutoModelForCausalLM.from_pretrained(model)  # no error: the premise of all of this
    assert DROPPED in loaded.state_dict()
    with pytest.raises(CheckpointError, match=rf"tensor '{re.escape(DROPPED)}' that the loaded Qwen2ForCausalLM "
                                              rf"asks for is missing"):
        check_loaded(loaded, model, "--init")


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_hf_backend_refuses_a_model_that_would_not_load_whole(pico, tmp_path, breakage):
    from ewa.chat import load_tokenizer
    from ewa.sample.backends.hf import HFBackend

    model = broken(pico, tmp_path, breakage)
    settings = sample_settings(n=1, max_new_tokens=4, batch_size=2, backend="hf")
    with pytest.raises(CheckpointError, match=f"^--model: {re.escape(str(model))}{BREAKAGES[breakage][1]}"):
        HFBackend(str(model), load_tokenizer(pico), settings)


def test_sample_of_a_model_missing_a_tensor_is_one_line(pico, problems_file, tmp_path, capsys):
    model = broken(pico, tmp_path, "missing")
    out = tmp_path / "samples" / "reasoning.jsonl"
    settings = {"n": 1, "max_new_tokens": 4, "backend": "hf", "batch_size": 2}
    rc = main(["sample", "--model", str(model), "--problems", str(problems_file), "--setting", "reasoning",
               "--config", json.dumps({"sample": settings, "seed": 0}), "--out", str(out)])
    line = one_error_line(capsys.readouterr().err, "sample")
    assert rc == 2 and re.search(BREAKAGES["missing"][1], line)
    assert not out.exists()


def test_train_refuses_an_init_missing_a_tensor_before_training(pico, problems_file, tmp_path, capsys):
    model = broken(pico, tmp_path, "missing")
    out = tmp_path / "checkpoints" / "high"
    grpo = {"max_steps": 1, "prompts_per_step": 1, "num_generations": 2, "max_completion_length": 8}
    config = {"grpo": grpo, "sandbox": {"backend": "bwrap"}, "regimes": REGIMES, "seed": 0}
    rc = main(["train", "--init", str(model), "--problems", str(problems_file), "--regime", "high",
               "--config", json.dumps(config), "--out", str(out)])
    line = one_error_line(capsys.readouterr().err, "train")
    assert rc == 2 and line.startswith(f"ewa train: error: --init: {model}/model.safetensors: tensor '{DROPPED}'")
    assert not out.exists() and not (out.parent / ".high.work").exists()


@pytest.mark.parametrize("breakage", ["missing", "shape"])
def test_init_refuses_a_local_model_that_would_not_load_whole(pico, problems_file, tmp_path, capsys, breakage):
    model = broken(pico, tmp_path, breakage)
    out = tmp_path / "init"
    rc = main(["init", "--init", str(model), "--config", json.dumps({"model": {"sft": {"steps": 0}}}),
               "--problems", str(problems_file), "--out", str(out)])
    line = one_error_line(capsys.readouterr().err, "init")
    assert rc == 2 and re.search(f"--init: {re.escape(str(model))}{BREAKAGES[breakage][1]}", line)
    assert not out.exists()


# --- merging ----------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def endpoints(pico, tmp_path_factory) -> tuple[Path, Path]:
    """A = the pico init, B = a perturbed copy (the same architecture, other weights)."""
    b = shutil.copytree(pico, tmp_path_factory.mktemp("endpoints") / "b")
    generator = torch.Generator().manual_seed(0)
    edit_weights(b, lambda s: {k: v + 0.01 * torch.randn(v.shape, generator=generator) for k, v in s.items()})
    return pico, b


def merge_cli(a: Path, b: Path, *args: str) -> int:
    return main(["merge", str(a), str(b), "--device", "cpu", *args])


def test_merge_refuses_inputs_that_both_miss_a_tensor(endpoints, tmp_path, capsys):
    """The inputs agree with each other, but not with their config: the outputs would load a random tensor."""
    a, b = (broken(m, tmp_path / m.name, "missing") for m in endpoints)
    out = tmp_path / "merged"
    rc = merge_cli(a, b, "--alpha", "0.5", "--out", str(out))
    line = one_error_line(capsys.readouterr().err, "merge")
    assert rc == 2 and re.search(f"error: {re.escape(str(a))}{BREAKAGES['missing'][1]}", line)
    assert not out.exists()


def test_merge_refuses_an_invalid_config_json(endpoints, tmp_path, capsys):
    a, b = endpoints
    bad = shutil.copytree(b, tmp_path / "b")
    (bad / "config.json").write_text('{"model_type": "qwen2",')
    out = tmp_path / "merged"
    rc = merge_cli(a, bad, "--alpha", "0.5", "--out", str(out))
    line = one_error_line(capsys.readouterr().err, "merge")
    assert rc == 2 and f"{bad}/config.json is not valid JSON" in line
    assert not out.exists()


def test_merge_refuses_endpoints_whose_configs_disagree(endpoints, tmp_path, capsys):
    """Twice the heads, each half as wide: every tensor keeps its shape, so only the configs tell."""
    a, b = endpoints
    other = shutil.copytree(b, tmp_path / "b")
    edit_config(other, lambda c: c.update(num_attention_heads=2 * c["num_attention_heads"],
                                          num_key_value_heads=2 * c["num_key_value_heads"]))
    check_loadable(other)  # a loadable model on its own
    out = tmp_path / "merged"
    rc = merge_cli(a, other, "--alpha", "0.5", "--out", str(out))
    line = one_error_line(capsys.readouterr().err, "merge")
    assert rc == 2 and re.search(rf"{re.escape(str(other))}/config\.json: 'num_attention_heads' is \d+ but \d+ in "
                                 rf"{re.escape(str(a))}/config\.json", line)
    assert not out.exists()


def test_merge_ignores_keys_that_do_not_change_the_computation(endpoints, tmp_path):
    """B's config in the layout an older transformers wrote (rope_theta at the top, torch_dtype), with its
    own provenance: the same model, so the merge goes ahead and writes A's config as parsed."""
    a, b = endpoints
    legacy = shutil.copytree(b, tmp_path / "b")

    def older(config):
        config["rope_theta"] = config.pop("rope_parameters")["rope_theta"]
        config["torch_dtype"] = config.pop("dtype")
        config.update(transformers_version="4.43.1", _name_or_path="Qwen/elsewhere", use_cache=False)
        del config["layer_types"]

    edit_config(legacy, older)
    a_compact = shutil.copytree(a, tmp_path / "a")
    (a_compact / "config.json").write_text(json.dumps(json.loads((a / "config.json").read_text())))  # one line
    (out,) = merge_linear(a_compact, legacy, [0.5], [tmp_path / "merged"], device="cpu", progress=False)
    written = (out / "config.json").read_text()
    assert json.loads(written) == json.loads((a / "config.json").read_text())
    assert written != (a_compact / "config.json").read_text()  # written from the parsed object, not copied
    check_loadable(out)


def test_merge_clears_what_a_killed_run_left_and_only_that(endpoints, tmp_path, capsys):
    a, b = endpoints
    grid = tmp_path / "grid"
    killed = grid / ".+0.50.abcd1234.tmp"  # atomic_path's temporary, as a SIGKILLed merge leaves it
    (killed / "+0.50").mkdir(parents=True)
    (killed / "+0.50" / "model-00001-of-00003.safetensors").write_bytes(b"\0" * 4096)
    elsewhere = grid / ".+1.00.wxyz5678.tmp"  # another output's: this merge does not own it
    elsewhere.mkdir()
    assert merge_cli(a, b, "--alphas", "0.5", "--out-pattern", f"{grid}/{{alpha}}") == 0
    assert "removed 1 stale temporary" in capsys.readouterr().out
    assert sorted(p.name for p in grid.iterdir()) == ["+0.50", ".+1.00.wxyz5678.tmp"]
    check_loadable(grid / "+0.50")


HOLD = """
import sys, time
from ewa.io import exclusive_output
with exclusive_output(sys.argv[1], what="ewa merge"):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_second_merge_of_the_same_output_refuses(endpoints, tmp_path, capsys):
    a, b = endpoints
    out = tmp_path / "merged"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        rc = merge_cli(a, b, "--alphas", "0.5", "1.5", "--out-pattern", f"{tmp_path}/{{alpha}}")
        assert rc == 0  # other outputs are free
        rc = merge_cli(a, b, "--alpha", "0.5", "--out", str(out))
        line = one_error_line(capsys.readouterr().err, "merge")
        assert rc == 2 and f"{out}: another run is writing it (ewa merge on host {socket.gethostname()} " \
                           f"pid {holder.pid} since" in line
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()
    assert merge_cli(a, b, "--alpha", "0.5", "--out", str(out)) == 0  # the holder died: its lock with it
    check_loadable(out)


def test_merge_never_publishes_a_shard_that_does_not_read_back(endpoints, tmp_path, monkeypatch):
    """A write that is lost (a flaky network filesystem, a bug in the writer): the first shard ends 64
    bytes short of what its header promises. The merge must notice before renaming anything into place."""
    from ewa.merge.writer import ModelWriter

    a, b = endpoints
    close = ModelWriter._close

    def lossy_close(self):
        if self.handle is not None and "-00001-of-" in self.handle.name:
            self.handle.truncate(self.handle.tell() - 64)
        close(self)

    monkeypatch.setattr(ModelWriter, "_close", lossy_close)
    outs = [tmp_path / "grid" / name for name in ("+0.50", "+1.50")]
    with pytest.raises(MergeError, match=r"/grid/\+0\.50: the written model does not read back \(.*"
                                         r"model-00001-of-\d+\.safetensors: not a readable safetensors file"):
        merge_linear(a, b, [0.5, 1.5], outs, device="cpu", max_shard_bytes="60KB", progress=False)
    assert list((tmp_path / "grid").iterdir()) == []  # no output, no temporary, no lock


@contextmanager
def tiny_tmpfs(path: Path, size: str):
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root, or no mount namespace)")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


def test_merge_onto_a_full_disk_is_one_line_and_leaves_nothing(endpoints, tmp_path, capsys):
    a, b = endpoints
    with tiny_tmpfs(tmp_path / "disk", "256k") as disk:
        rc = merge_cli(a, b, "--alphas", "-0.5", "0.5", "1.5", "2.5", "--out-pattern", f"{disk}/{{alpha}}")
        line = one_error_line(capsys.readouterr().err, "merge")
        assert rc == 2 and re.search(rf"{re.escape(str(disk))}/\S+: no space left on device while writing .+; "
                                     rf"nothing was published$", line)
        assert list(disk.iterdir()) == []


def test_merge_past_the_file_size_limit_is_one_line_and_leaves_nothing(endpoints, tmp_path):
    """RLIMIT_FSIZE (EFBIG) stands in for a full disk where no tmpfs can be mounted."""
    a, b = endpoints

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() fails with EFBIG instead of killing

    out = tmp_path / "merged"
    proc = subprocess.run([sys.executable, "-m", "ewa.cli", "merge", str(a), str(b), "--alpha", "0.5",
                           "--out", str(out), "--device", "cpu"], preexec_fn=limit, capture_output=True, text=True,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    line = one_error_line(proc.stderr, "merge")
    assert proc.returncode == 2 and re.search(rf"{re.escape(str(out))}: file too large while writing .+; "
                                              rf"nothing was published$", line)
    assert list(tmp_path.iterdir()) == []
