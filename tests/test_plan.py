"""`ewa plan`: exact parameter counts from a model's config.json, the paper configs fitting 8 x 80 GB nodes,
refusals that name the rule in one line, and a plan that writes nothing. The model configs are the
published Qwen2.5-Coder-7B/32B-Instruct architectures, committed under tests/fixtures/models/."""
from __future__ import annotations

import json
import re

import pytest
import yaml

from helpers import ROOT

from ewa.cli import main
from ewa.plan.model import architecture
from ewa.plan.speed import STARTUP_H

MODELS = ROOT / "tests" / "fixtures" / "models"
PAPER = {"paper-7b": MODELS / "Qwen2.5-Coder-7B-Instruct", "paper-32b": MODELS / "Qwen2.5-Coder-32B-Instruct"}
SLURM = ROOT / "profiles" / "slurm"


def plan(capsys, configfile, *flags, model=None, profile=SLURM) -> tuple[int, str, list[str]]:
    argv = ["plan", "--configfile", str(configfile), *flags]
    argv += ["--profile", str(profile)] if profile else []
    argv += ["--model-config", str(model)] if model else []
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err.strip().splitlines()


def paper_variant(tmp_path, name: str, sample: dict | None = None, **grpo) -> tuple:
    """configs/<name>.yaml with `grpo` keys replaced (None removes a key) and `sample` keys updated, and its
    model fixture."""
    config = yaml.safe_load((ROOT / "configs" / f"{name}.yaml").read_text())
    config["sample"].update(sample or {})
    for key, value in grpo.items():
        if value is None:
            config["grpo"].pop(key, None)
        else:
            config["grpo"][key] = value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, PAPER[name]


@pytest.mark.parametrize("name, parameters", [("Qwen2.5-Coder-7B-Instruct", 7_615_616_512),
                                              ("Qwen2.5-Coder-32B-Instruct", 32_763_876_352)])
def test_parameter_count_is_exact(name, parameters):
    # By hand for 7B: untied embeddings and LM head 2 x 152064 x 3584; per layer q/k/v with biases
    # (3584^2 + 3584, 2 x (3584 x 512 + 512)), o 3584^2, MLP 3 x 3584 x 18944, two norms; 28 layers; final norm.
    arch = architecture({"init": str(MODELS / name)})  # model.init's config.json, as for a paper config
    assert arch.parameters == parameters
    per_layer = 3584 ** 2 + 3584 + 2 * (3584 * 512 + 512) + 3584 ** 2 + 3 * 3584 * 18944 + 2 * 3584
    assert architecture({"init": str(MODELS / "Qwen2.5-Coder-7B-Instruct")}).parameters == \
        2 * 152064 * 3584 + 28 * per_layer + 3584


@pytest.mark.parametrize("name", PAPER)
def test_paper_config_fits_an_8_x_80_gb_node(name, capsys):
    rc, out, err = plan(capsys, ROOT / "configs" / f"{name}.yaml", "--json", model=PAPER[name])
    assert rc == 0 and err == []
    result = json.loads(out)
    assert result["fits"] and result["refusal"] is None
    train = result["rules"]["train"]
    assert train["gpus"] == 8 and train["gpu_mem_gb"] == 80 and train["peak_gb"] <= 70  # headroom for longer prompts
    for rule in ("train", "merge", "sample"):
        assert result["rules"][rule]["peak_gb"] <= result["rules"][rule]["gpu_mem_gb"], rule
    assert train["hours"] > 0 and result["disk"]["merge_temp"]
    disk = result["disk"]
    assert disk["merged_peak_gb"] < disk["merged_all_gb"]  # temp merges: only the alphas in flight


def test_paper_plans_pin_the_arithmetic(capsys):
    result = json.loads(plan(capsys, ROOT / "configs/paper-32b.yaml", "--json", model=PAPER["paper-32b"])[1])
    train = result["rules"]["train"]
    # ZeRO-3 over 8 GPUs: 2 bytes per parameter of weights (and of the reference model) per GPU; the
    # 12 bytes of optimizer state go to the host with the fp32 gradients (16 bytes for the node)
    assert train["memory_gb"]["weights"] == train["memory_gb"]["reference"] == round(2 * 32_763_876_352 / 8 / 1e9, 1)
    assert "optimizer" not in train["memory_gb"] and "gradients" not in train["memory_gb"]
    assert train["memory_gb"]["vLLM"] == 24.0  # 0.3 x 80 GB
    assert any("524.2 GB of offloaded optimizer" in d for d in train["details"])
    result = json.loads(plan(capsys, ROOT / "configs/paper-7b.yaml", "--json", model=PAPER["paper-7b"])[1])
    terms = result["rules"]["train"]["memory_gb"]
    assert terms["optimizer"] == round(12 * 7_615_616_512 / 8 / 1e9, 1)
    assert result["disk"]["merged_all_gb"] == round(17 * 2 * 7_615_616_512 / 1e9, 1)


@pytest.mark.parametrize("batch", [64, None])  # None: the whole 32 x 16 / 8 = 64 completions per GPU at once
def test_a_micro_batch_of_64_is_refused_naming_the_rule(batch, tmp_path, capsys):
    config, model = paper_variant(tmp_path, "paper-7b", per_device_train_batch_size=batch)
    rc, out, err = plan(capsys, config, model=model)
    assert rc == 1 and len(err) == 1
    assert re.fullmatch(r"plan: rule train needs \d+\.\d GB per GPU, profile gives 80 GB \(largest: activations "
                        r".*per_device_train_batch_size\)", err[0]), err[0]
    assert re.search(r"^train .* REFUSED$", out, re.M)  # the plan is still printed


def test_32b_without_offload_or_with_vllm_at_tp1_is_refused(tmp_path, capsys):
    config, model = paper_variant(tmp_path, "paper-32b", accelerate_config="zero3")
    rc, _, err = plan(capsys, config, model=model)
    assert rc == 1 and len(err) == 1 and "rule train" in err[0] and "optimizer 49.1 GB" in err[0]
    config, model = paper_variant(tmp_path, "paper-32b", vllm_tensor_parallel_size=1)
    rc, _, err = plan(capsys, config, model=model)
    assert rc == 1 and len(err) == 1
    assert err[0].startswith("plan: rule train needs") and "for vLLM" in err[0]
    assert "vllm_tensor_parallel_size" in err[0]


def sample_plan(capsys, tmp_path, name: str, **sample) -> dict:
    config, model = paper_variant(tmp_path, name, sample)
    rc, out, _ = plan(capsys, config, "--json", model=model)
    assert rc == 0
    return json.loads(out)["rules"]["sample"]


def test_a_7b_split_over_gpus_is_advised_data_parallel_engines(tmp_path, capsys):
    # 15 GB of weights and a full batch's KV cache fit one 80 GB GPU; 32B's 65 GB fit neither one nor two
    tp4 = sample_plan(capsys, tmp_path, "paper-7b", tensor_parallel_size=4, data_parallel_size=1)
    advice = [d for d in tp4["details"] if d.startswith("TP 1 fits")]
    assert len(advice) == 1 and "sample.tensor_parallel_size 1 x sample.data_parallel_size 4" in advice[0], tp4
    dp4 = sample_plan(capsys, tmp_path, "paper-7b", tensor_parallel_size=1, data_parallel_size=4)
    big = sample_plan(capsys, tmp_path, "paper-32b", tensor_parallel_size=4, data_parallel_size=1)
    assert not any(d.startswith("TP ") for d in dp4["details"] + big["details"])


def test_sample_gpus_are_tp_times_dp_and_the_engines_share_the_work(tmp_path, capsys):
    four = sample_plan(capsys, tmp_path, "paper-7b", tensor_parallel_size=1, data_parallel_size=4)
    assert four["gpus"] == 4 and not any("differs" in d for d in four["details"])
    assert any(d.startswith("vLLM, 4 engines of TP 1 on 4 GPUs") for d in four["details"])
    two = sample_plan(capsys, tmp_path, "paper-7b", tensor_parallel_size=1, data_parallel_size=2)
    assert any("sample.tensor_parallel_size 1 x sample.data_parallel_size 2 = 2 GPUs differs from the 4 GPUs"
               in d for d in two["details"]), two["details"]
    one = sample_plan(capsys, tmp_path, "paper-7b", tensor_parallel_size=1, data_parallel_size=1)
    # startup once per job, whatever the engines; hours are rounded to 0.1
    assert one["hours"] - STARTUP_H == pytest.approx(4 * (four["hours"] - STARTUP_H), rel=0.05)


def test_gpu_memory_comes_from_the_profile(tmp_path, capsys):
    profile = yaml.safe_load((SLURM / "config.yaml").read_text())
    profile["set-resources"]["train"]["gpu_mem_gb"] = 40
    (tmp_path / "small").mkdir()
    (tmp_path / "small" / "config.yaml").write_text(yaml.safe_dump(profile))
    rc, _, err = plan(capsys, ROOT / "configs/paper-7b.yaml", model=PAPER["paper-7b"], profile=tmp_path / "small")
    assert rc == 1 and err[0].startswith("plan: rule train needs") and "profile gives 40 GB" in err[0]
    del profile["set-resources"]["train"]["gpu_mem_gb"]  # gpu_model h100 -> 80 GB
    (tmp_path / "small" / "config.yaml").write_text(yaml.safe_dump(profile))
    result = json.loads(plan(capsys, ROOT / "configs/paper-7b.yaml", "--json", model=PAPER["paper-7b"],
                             profile=tmp_path / "small")[1])
    assert result["rules"]["train"]["gpu_mem_gb"] == 80


@pytest.mark.parametrize("change, needle", [
    ({"model": "missing"}, "--model-config: {tmp}/nowhere is missing"),
    ({"init": "missing"}, "model.init: /models/Qwen2.5-Coder-7B-Instruct/config.json is missing"),
    ({"grpo": {"lr": 1}}, "unknown key 'grpo.lr'"),
    ({"grpo": {"vllm_tensor_parallel_size": 8}}, "grpo.vllm_tensor_parallel_size: 8 does not divide the model's 28"),
    ({"grpo": {"per_device_train_batch_size": 3}}, "grpo.per_device_train_batch_size: 3 x 8 processes"),
    ({"profile": "missing"}, "--profile: {tmp}/noprofile/config.yaml is missing"),
])
def test_bad_input_is_one_line_naming_the_field(change, needle, tmp_path, capsys):
    config = yaml.safe_load((ROOT / "configs/paper-7b.yaml").read_text())
    config["grpo"].update(change.get("grpo", {}))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    model = {"missing": tmp_path / "nowhere", None: PAPER["paper-7b"]}[change.get("model")]
    if change.get("init") == "missing":
        model = None  # the paper config's own model.init, which does not exist here
    profile = tmp_path / "noprofile" if change.get("profile") else SLURM
    rc, out, err = plan(capsys, tmp_path / "c.yaml", model=model, profile=profile)
    assert rc == 2 and out == "" and len(err) == 1, err
    assert needle.format(tmp=tmp_path) in err[0]


def test_plan_writes_nothing_but_stdout(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    before = sorted(p for p in MODELS.rglob("*"))
    rc, out, _ = plan(capsys, ROOT / "configs/paper-7b.yaml", model=PAPER["paper-7b"])
    assert rc == 0 and out.startswith("ewa plan: ")
    assert list(tmp_path.iterdir()) == [] and sorted(MODELS.rglob("*")) == before


def test_the_miniature_plans_without_a_profile(capsys):
    # model.init: tiny is costed from model.tiny; without a profile nothing runs on a GPU
    result = json.loads(plan(capsys, ROOT / "config.yaml", "--json", profile=None)[1])
    assert result["fits"] and result["model"]["source"] == "model.tiny" and result["profile"] is None
    assert all(r["gpus"] == 0 and r["peak_gb"] is None for r in result["rules"].values())
    mini = next(b for b in result["benchmarks"] if b["name"] == "mini")
    assert mini["counted"] and mini["problems"] > 0  # the bundled set is counted, not assumed


def test_docs_show_the_plan_they_document(capsys):
    """The "Planning a run" block of docs/scale.md is this command's real output (rows of the rule table)."""
    block = re.search(r"## Planning a run.*?```\n\$ (ewa plan [^\n]*)\n(.*?)```", (ROOT / "docs/scale.md").read_text(),
                      re.S)
    assert block, "docs/scale.md: no Planning a run block"
    out = plan(capsys, ROOT / "configs/paper-7b.yaml", model=PAPER["paper-7b"])[1]
    rows = [line for line in block[2].splitlines() if re.match(r"(init|train|merge|sample|evaluate) ", line)]
    assert len(rows) == 5 and all(row in out.splitlines() for row in rows)
