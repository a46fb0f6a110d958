"""`ewa plan`: exact parameter counts from a model's config.json, the paper configs fitting 8 x 80 GB nodes
within --max-memory-share, refusals that name the rule and the change that fits in one line, merge I/O per
job layout, and a plan that writes nothing. The model configs are the published Qwen2.5-Coder-7B/32B-Instruct
architectures, committed under tests/fixtures/models/ (14B is written from its published numbers)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
import re

import pytest
import yaml

from helpers import ROOT

from ewa.cli import main
from ewa.plan import memory
from ewa.plan.cli import add_plan_arguments, plan_inputs
from ewa.plan.model import architecture
from ewa.plan.training import memory_terms, step_layout
from ewa.plan.training import train_plan as train_rule
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


def qwen_14b(tmp_path, micro_batch: int, **grpo) -> tuple:
    """configs/paper-7b.yaml on Qwen2.5-Coder-14B-Instruct (hidden 5120, 48 layers, 40 heads, 8 KV heads,
    intermediate 13824, vocabulary 152064, untied; its config.json from the 32B's with those numbers), the
    colocated vLLM over 2 GPUs (29.5 GB of weights cannot fit a 0.3 x 80 GB share on one)."""
    model = tmp_path / "Qwen2.5-Coder-14B-Instruct"
    model.mkdir(exist_ok=True)
    raw = json.loads((PAPER["paper-32b"] / "config.json").read_text())
    raw.update(num_hidden_layers=48, intermediate_size=13824, max_window_layers=48)
    (model / "config.json").write_text(json.dumps(raw))
    variant = tmp_path / f"variant{len(list(tmp_path.glob('variant*')))}"  # each call its own config file
    variant.mkdir()
    config, _ = paper_variant(variant, "paper-7b", **{"per_device_train_batch_size": micro_batch,
                                                      "vllm_tensor_parallel_size": 2, **grpo})
    return config, model


def with_profile(tmp_path, edit) -> Path:
    """profiles/slurm/config.yaml passed through `edit(profile)`, as a profile directory under tmp_path."""
    profile = yaml.safe_load((SLURM / "config.yaml").read_text())
    edit(profile)
    directory = tmp_path / "profile"
    directory.mkdir(exist_ok=True)
    (directory / "config.yaml").write_text(yaml.safe_dump(profile))
    return directory


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
    assert result["max_memory_share"] == 0.9 and train["limit_gb"] == 72.0 and train["peak_gb"] <= train["limit_gb"]
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
    assert re.fullmatch(r"plan: rule train needs \d+\.\d GB per GPU, profile gives 80 GB of which a job may plan "
                        r"0\.9 = 72\.0 GB \(--max-memory-share\) \(largest: activations \d+\.\d GB; fix: lower "
                        r"grpo\.per_device_train_batch_size from 64 to 8 \(67\.3 GB\)\)", err[0]), err[0]
    assert re.search(r"^train .* REFUSED$", out, re.M)  # the plan is still printed


def train_plan(capsys, config, model, *flags) -> tuple[int, dict, list[str]]:
    rc, out, err = plan(capsys, config, "--json", *flags, model=model)
    return rc, json.loads(out)["rules"]["train"], err


@pytest.mark.parametrize("case", ["14b micro-batch 2", "32b micro-batch 4"])
def test_configs_within_the_gpu_but_not_its_margin_are_refused(case, tmp_path, capsys):
    """Both fit 80 GB on paper (76.2 and 72.5 GB), neither leaves room for allocator fragmentation: refused
    at the default share of 0.9, naming it; accepted when --max-memory-share allows all of the GPU."""
    config, model = (qwen_14b(tmp_path, 2) if case.startswith("14b")
                     else paper_variant(tmp_path, "paper-32b", per_device_train_batch_size=4))
    rc, train, err = train_plan(capsys, config, model)
    assert rc == 1 and 72 < train["peak_gb"] <= 80 and train["limit_gb"] == 72.0
    assert len(err) == 1 and err[0].startswith("plan: rule train needs") and train["refusal"] == err[0]
    assert "profile gives 80 GB of which a job may plan 0.9 = 72.0 GB (--max-memory-share)" in err[0]
    rc, train, err = train_plan(capsys, config, model, "--max-memory-share", "1")
    assert rc == 0 and err == [] and train["limit_gb"] == 80.0


def test_the_advice_is_a_change_that_fits_and_vllm_is_not_shrunk_below_its_need(tmp_path, capsys):
    """14B micro-batch 4: vLLM's 24 GB is the largest term but it needs 20 GB at TP 2, and micro-batch 1 alone
    still needs 72.5 GB; sleep mode fits. Each advice, applied, gives the plan it names."""
    config, model = qwen_14b(tmp_path, 4)
    assert architecture({"init": str(model)}).parameters == 14_770_033_664  # Qwen2.5-Coder-14B's 14.7 B
    rc, train, err = train_plan(capsys, config, model)
    assert rc == 1 and train["peak_gb"] > 80
    assert "largest: vLLM 24.0 GB, of which vLLM needs 20.0 GB at TP 2; fix: set " \
           "grpo.trl.vllm_enable_sleep_mode: true (62.2 GB;" in err[0], err[0]
    assert "lower grpo.per_device_train_batch_size from 4 to 1 alone would need 72.5 GB" in err[0]
    assert "vllm_gpu_memory_utilization" not in err[0]
    fixed, _ = qwen_14b(tmp_path, 4, trl={"vllm_enable_sleep_mode": True})
    rc, train, err = train_plan(capsys, fixed, model)
    assert rc == 0 and err == [] and train["peak_gb"] == 62.2
    # a looser share lets micro-batch 1 fit: then the micro-batch is the advice (the cheapest change)
    rc, _, err = train_plan(capsys, config, model, "--max-memory-share", "0.95")
    assert rc == 1 and "fix: lower grpo.per_device_train_batch_size from 4 to 1 (72.5 GB)" in err[0], err[0]
    rc, _, err = train_plan(capsys, qwen_14b(tmp_path, 1)[0], model, "--max-memory-share", "0.95")
    assert rc == 0 and err == []


def test_32b_micro_batch_4_is_told_the_micro_batch_that_fits(tmp_path, capsys):
    config, model = paper_variant(tmp_path, "paper-32b", per_device_train_batch_size=4)
    rc, train, err = train_plan(capsys, config, model)
    assert rc == 1 and "(largest: vLLM 24.0 GB, of which vLLM needs 11.3 GB at TP 8; fix: lower " \
                       "grpo.per_device_train_batch_size from 4 to 2 (62.2 GB))" in err[0], err[0]
    rc, train, err = train_plan(capsys, ROOT / "configs/paper-32b.yaml", model)  # micro-batch 2, as shipped
    assert rc == 0 and train["peak_gb"] == 62.2


def test_vllm_that_cannot_start_is_told_the_tensor_parallel_size_that_holds_it(tmp_path, capsys):
    config, model = qwen_14b(tmp_path, 2, vllm_tensor_parallel_size=1)  # 29.5 GB of weights, a 24 GB share
    rc, _, err = train_plan(capsys, config, model, "--max-memory-share", "1")
    assert rc == 1 and err[0].startswith("plan: rule train needs 38.0 GB per GPU for vLLM")
    assert err[0].endswith("(raise grpo.vllm_tensor_parallel_size from 1 to 2)"), err[0]
    config, model = paper_variant(tmp_path, "paper-32b", {"tensor_parallel_size": 1, "data_parallel_size": 4})
    rc, _, err = plan(capsys, config, model=model)
    assert rc == 1 and "rule sample" in err[0]
    assert err[0].endswith("(raise sample.tensor_parallel_size from 1 to 2 and the profile's sample gpu to 8)"), err[0]


@pytest.mark.parametrize("per_job", [1, 6])
def test_merge_io_is_reported_for_per_alpha_jobs_and_for_chunks(per_job, tmp_path, capsys):
    """17 alphas at 32B (65.5 GB each): one job per alpha reads both endpoints 17 times; chunks of 6 read
    them 3 times. The plan prints both figures whichever the profile uses."""
    def chunks(profile):
        profile["set-resources"]["merge"]["alphas_per_job"] = per_job
    result = json.loads(plan(capsys, ROOT / "configs/paper-32b.yaml", "--json", model=PAPER["paper-32b"],
                             profile=with_profile(tmp_path, chunks))[1])
    merge, size = result["rules"]["merge"], 2 * 32_763_876_352 / 1e9
    jobs = {1: 17, 6: 3}[per_job]
    assert merge["jobs"] == jobs and merge["io_gb"]["read"] == round(2 * jobs * size, 1)
    assert merge["io_gb"]["read_one_alpha_per_job"] == round(2 * 17 * size, 1) == 2227.9
    assert merge["io_gb"]["written"] == round(17 * size, 1)
    line = next(d for d in merge["details"] if d.startswith("17 alphas"))
    if per_job == 1:
        assert "one job per alpha: read 2,227.9 GB" in line and "alphas_per_job: 17 would read 131.1 GB" in line
    else:
        assert "3 jobs of up to 6 alphas" in line and "read 393.2 GB" in line
        assert "17 jobs of one alpha would read 2,227.9 GB" in line
    assert result["disk"]["alphas_at_once"] >= per_job  # a chunk's merged models appear together


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
    assert "0.9 = 36.0 GB" in err[0]
    del profile["set-resources"]["train"]["gpu_mem_gb"]  # gpu_model h100 -> 80 GB
    (tmp_path / "small" / "config.yaml").write_text(yaml.safe_dump(profile))
    result = json.loads(plan(capsys, ROOT / "configs/paper-7b.yaml", "--json", model=PAPER["paper-7b"],
                             profile=tmp_path / "small")[1])
    assert result["rules"]["train"]["gpu_mem_gb"] == 80


@pytest.mark.parametrize("change, needle", [
    ({"model": "missing"}, "--model-config: {tmp}/nowhere is missing"),
    ({"init": "missing"}, "config: key 'model.init': hf://Qwen/Qwen2.5-Coder-7B-Instruct: no local directory "
                          "Qwen/Qwen2.5-Coder-7B-Instruct either, and not in the Hugging Face cache {tmp}/hf/hub; "
                          "stage it on a node with network (a login node): ewa stage {tmp}/c.yaml"),
    ({"grpo": {"lr": 1}}, "unknown key 'grpo.lr'"),
    ({"grpo": {"vllm_tensor_parallel_size": 8}}, "grpo.vllm_tensor_parallel_size: 8 does not divide the model's 28"),
    ({"grpo": {"per_device_train_batch_size": 3}}, "grpo.per_device_train_batch_size: 3 x 8 processes"),
    ({"profile": "missing"}, "--profile: {tmp}/noprofile/config.yaml is missing"),
    ({"share": "1.5"}, "--max-memory-share: expected a share of the GPU memory in (0, 1], got 1.5"),
])
def test_bad_input_is_one_line_naming_the_field(change, needle, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # a Hugging Face cache that holds nothing
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    config = yaml.safe_load((ROOT / "configs/paper-7b.yaml").read_text())
    config["grpo"].update(change.get("grpo", {}))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    model = {"missing": tmp_path / "nowhere", None: PAPER["paper-7b"]}[change.get("model")]
    if change.get("init") == "missing":
        model = None  # the paper config's own model.init, a Hub name not staged here
    profile = tmp_path / "noprofile" if change.get("profile") else SLURM
    flags = ["--max-memory-share", change["share"]] if "share" in change else []
    rc, out, err = plan(capsys, tmp_path / "c.yaml", *flags, model=model, profile=profile)
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


@pytest.mark.parametrize("science, inits", [
    ({}, 5),  # the default seeds, each building its own init
    ({"seeds": [7, 8, 9], "init_seed": 70}, 1),  # the paper's design: one shared init
    ({"seeds": [7, 8], "init_seed": 70, "init_from": "../../../results/init/seed70/model"}, 0),  # a control
])
def test_science_all_costs_every_seed_and_the_inits_it_builds(science, inits, tmp_path, capsys):
    config, model = paper_variant(tmp_path, "paper-7b")
    raw = yaml.safe_load(config.read_text())
    raw["science"] = science
    config.write_text(yaml.safe_dump(raw))
    result = json.loads(plan(capsys, config, "--json", model=model)[1])
    rules, study = result["rules"], result["science_all"]
    seeds = len(science.get("seeds", [100, 101, 102, 103, 104]))
    assert study["seeds"] == seeds and study["inits"] == inits
    assert study["jobs"] == {"init": inits, "train": 2 * seeds, "merge": rules["merge"]["jobs"] * seeds,
                             "sample": rules["sample"]["jobs"] * seeds, "evaluate": rules["evaluate"]["jobs"] * seeds}
    per_seed = ("train", "merge", "sample", "evaluate")
    assert study["gpu_hours"] == round(seeds * sum(rules[r]["gpu_hours"] for r in per_seed)) > 0
    assert study["cpu_hours"] == round(seeds * sum(rules[r]["cpu_hours"] for r in per_seed), 1)
    kept = result["disk"]["kept_gb"]
    assert study["kept_gb"] == round(inits * kept["init"] + seeds * (result["disk"]["total_gb"] - kept["init"]), 1)
    text = " ".join(plan(capsys, config, model=model)[1].split())
    assert f"once per seed of science.seeds ({seeds})" in text and f"{study['gpu_hours']:,} GPU-h" in text


# Qwen2.5-Coder-1.5B-Instruct's published config.json (the architecture fields; tied embeddings)
QWEN_1_5B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 1536,
             "intermediate_size": 8960, "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
             "vocab_size": 151936, "tie_word_embeddings": True, "max_position_embeddings": 32768,
             "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "hidden_act": "silu", "sliding_window": 32768,
             "max_window_layers": 21, "use_sliding_window": False, "torch_dtype": "bfloat16"}
# One GRPO step measured on an NVIDIA H100 80 GB (issue [T]; /work/shared/gpu-check/tools/memory_step.py): the
# 1.5B shape, one process, no ZeRO, bf16, activation checkpointing, micro-batch 4 x (1,024 + 4,096) tokens, beta
# 0.01, under the old path that loaded bf16 weights (AdamW moments in bf16: 6.2 GB of optimizer state).
MEASURED_PEAK_GB = 19.7  # 18.4 GB allocated at the peak + 0.8 GB CUDA context + reserved but unallocated
MEASURED_OPTIMIZER_GB = 6.2


def measured_setting(tmp_path):
    """`ewa plan`'s inputs for the measured setting: the 1.5B config.json, one 80 GB GPU (the paper-7b config's
    benchmarks, assumed sizes: the train rule does not read them)."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(QWEN_1_5B))
    config, _ = paper_variant(tmp_path, "paper-7b", max_steps=2, prompts_per_step=1, num_generations=4,
                              per_device_train_batch_size=4, max_completion_length=4096, beta=0.01, bf16=True,
                              gradient_checkpointing=True, use_vllm=False, accelerate_config=None)
    gpu = with_profile(tmp_path, lambda profile: profile["set-resources"]["train"].update(gpu=1, gpu_mem_gb=80))
    parser = argparse.ArgumentParser()
    add_plan_arguments(parser)
    return plan_inputs(parser.parse_args(["--configfile", str(config), "--profile", str(gpu), "--model-config",
                                          str(tmp_path / "model"), "--prompt-tokens", "1024"]))


def test_tied_embeddings_are_counted_once(tmp_path):
    # Built on the meta device the LM head stayed a second 151936 x 1536 matrix (1,777,088,000). By hand: one
    # embedding; per layer q/k/v with biases, o, the SwiGLU MLP, two norms; 28 layers; the final norm.
    (tmp_path / "config.json").write_text(json.dumps(QWEN_1_5B))
    per_layer = 1536 ** 2 + 1536 + 2 * (1536 * 256 + 256) + 1536 ** 2 + 3 * 1536 * 8960 + 2 * 1536
    arch = architecture({"init": str(tmp_path)})
    assert arch.parameters == 151936 * 1536 + 28 * per_layer + 1536 == 1_543_714_304 and arch.tied


def test_the_plan_covers_the_step_measured_on_an_h100(tmp_path):
    """Within +10% of the measured peak and never under it, computed for what that run held (bf16 weights,
    moments and reference); and for the path ewa trains on now (fp32 weights and moments under bf16 autocast,
    the reference loaded like the policy) the model states follow from the bytes per parameter, not a fit."""
    inputs = measured_setting(tmp_path)
    p = inputs.arch.parameters
    terms, peak, _ = memory_terms(inputs, step_layout(inputs), memory.PURE_BF16)
    assert MEASURED_PEAK_GB <= peak / 1e9 <= 1.10 * MEASURED_PEAK_GB, peak
    assert round(terms["optimizer"] / 1e9, 1) == MEASURED_OPTIMIZER_GB  # 4 bytes per parameter, as measured
    train = vars(train_rule(inputs))
    gb = train["memory_gb"]
    assert (gb["weights"], gb["gradients"], gb["optimizer"], gb["reference"]) == \
        tuple(round(n * p / 1e9, 1) for n in (4, 4, 8, 4))
    assert "autocast copies" not in gb  # forward's bf16 weight copies stay below what backward holds here
    assert train["peak_gb"] == 36.2 and train["refusal"] is None
    # docs/scale.md shows both figures
    section = re.search(r"## Predicted and measured\n(.*?)\n## ", (ROOT / "docs/scale.md").read_text(), re.S)[1]
    assert f"**{peak / 1e9:.1f} (+" in section and f"**{train['peak_gb']} GB**" in section


@pytest.mark.parametrize("accelerate_config, held", [
    ("zero3", (2, 2, 12, 2)),  # DeepSpeed casts to bf16 and keeps fp32 master weights and moments
    ("zero3_offload", (2, 0, 0, 2)),  # ... with the optimizer state (and its fp32 gradients) in host memory
    ("fsdp", (4, 4, 8, 4)),  # FSDP2 keeps fp32 shards (the reference too: loaded fp32) and gathers bf16
])
def test_model_states_follow_what_each_shipped_path_holds(accelerate_config, held, tmp_path, capsys):
    config, model = paper_variant(tmp_path, "paper-7b", accelerate_config=accelerate_config)
    rc, train, _ = train_plan(capsys, config, model)
    gb = train["memory_gb"]
    got = tuple(gb.get(k, 0) for k in ("weights", "gradients", "optimizer", "reference"))
    assert got == tuple(round(n * 7_615_616_512 / 8 / 1e9, 1) for n in held)


@pytest.mark.parametrize("entry", [
    {"format": "mini", "split": "heldout", "small_inputs": 0.5},  # the demo's benchmark
    {"format": "mini", "split": "heldout", "difficulty": ["easy"], "limit": 20},
    {"format": "mini", "split": "train", "limit": 8},
])
def test_the_bundled_mini_set_is_counted_as_built_without_building_it(entry):
    from ewa.data import load
    from ewa.formats import get

    options = {"small_inputs": entry["small_inputs"]} if "small_inputs" in entry else {}
    built = load("mini", split=entry["split"], difficulty=entry.get("difficulty"), limit=entry.get("limit"),
                 progress=False, **options).problems
    assert get("mini").plan.count(entry, seed=0) == (len(built), sum(len(p.tests) for p in built) / len(built))


def warm_start_setting(tmp_path, batch_size: int, init_resources: dict | None) -> tuple[Path, Path, Path]:
    """configs/paper-7b.yaml with a warm start (model.sft) of the 1.5B model, and profiles/slurm with
    `init_resources` added to the init rule's (None: as shipped, the CPU with 64 GB)."""
    (tmp_path / "model").mkdir(exist_ok=True)
    (tmp_path / "model" / "config.json").write_text(json.dumps(QWEN_1_5B))
    raw = yaml.safe_load((ROOT / "configs" / "paper-7b.yaml").read_text())
    raw["model"]["sft"] = {"steps": 20, "learning_rate": 1e-5, "batch_size": batch_size, "max_length": 1024}
    config = tmp_path / f"warm{batch_size}.yaml"
    config.write_text(yaml.safe_dump(raw))
    profile = with_profile(tmp_path, lambda p: p["set-resources"]["init"].update(init_resources or {}))
    return config, profile, tmp_path / "model"


def test_a_warm_start_is_costed_in_float32_where_the_init_runs(tmp_path, capsys):
    # one 80 GB GPU: fp32 weights, gradients and AdamW's two moments, 16 bytes per parameter, unsharded
    config, profile, model = warm_start_setting(tmp_path, 2, {"gpu": 1, "gpu_mem_gb": 80})
    rc, out, err = plan(capsys, config, "--json", model=model, profile=profile)
    init = json.loads(out)["rules"]["init"]
    p = 1_543_714_304  # Qwen2.5-Coder-1.5B, tied embeddings (test_tied_embeddings_are_counted_once)
    assert rc == 0 and err == [] and init["refusal"] is None
    assert init["memory_gb"]["weights"] == init["memory_gb"]["gradients"] == round(4 * p / 1e9, 1)
    assert init["memory_gb"]["optimizer"] == round(8 * p / 1e9, 1)
    assert init["peak_gb"] <= init["limit_gb"] == 72.0
    assert init["disk_gb"] == round(4 * p / 1e9, 1)  # saved as trained, in float32
    # 16 sequences of 1,024 tokens without checkpointing: the activations no longer fit
    config, profile, model = warm_start_setting(tmp_path, 16, {"gpu": 1, "gpu_mem_gb": 80})
    rc, out, err = plan(capsys, config, model=model, profile=profile)
    assert rc == 1 and len(err) == 1 and err[0].startswith("plan: rule init needs ")
    assert "(largest: activations; fix: warm-start the model outside ewa" in err[0]


@pytest.mark.parametrize("resources, needle", [
    (None, "GB of host memory for model.sft on the CPU, the profile gives 64 GB (mem_mb)"),
    ({"gpu": 2, "gpu_mem_gb": 80}, "one GPU (TRL's SFTTrainer refuses several), the profile gives it 2 "
                                   "(fix: set-resources.init gpu: 1)"),
])
def test_a_warm_start_the_init_job_cannot_hold_is_refused_in_one_line(resources, needle, tmp_path, capsys):
    config, profile, model = warm_start_setting(tmp_path, 8, resources)
    rc, out, err = plan(capsys, config, model=model, profile=profile)
    assert rc == 1 and len(err) == 1 and needle in err[0] and "rule init" in err[0]
    assert "init " in out and "REFUSED" in next(line for line in out.splitlines() if line.startswith("init "))
