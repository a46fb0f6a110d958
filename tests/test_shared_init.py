"""One init per experiment (science.init_seed): built once and shared by every seed's GRPO runs; a control
that starts from the study's init and calibration (science.init_from, sandbox.calibration) and refuses any
other; a regime's own GRPO seed (seed_stream). On the real workflow's dry runs, a real `ewa init`, a real
`ewa calibrate` and the real trainer."""
from __future__ import annotations

import json
import random
import re
import subprocess

import pytest
import yaml
from safetensors.torch import load_file

from helpers import BIN, PICO_WIDE, ROOT, reduced_config, workflow_env

from ewa.analysis.registry import RegistryError, check_ready, read_registry, register, write_registry
from ewa.cli import main
from ewa.config import ConfigError, validate
from ewa.problems import Problem, make_test, write_problems
from ewa.train.grpo import grpo_seed

INIT_SEED = 13
# SFT'd hard enough on one problem that the init writes code the sandbox judges: GRPO then has rewards to
# tell apart, and its weights move. Reasoning rows only: no sandbox traces to build.
MODEL = {"init": "tiny", "tiny": PICO_WIDE,
         "sft": {"steps": 60, "batch_size": 8, "learning_rate": 1e-2, "warmup_ratio": 0.1,
                 "mix": {"brute": 1, "efficient": 1, "wrong": 1, "tools": 0, "agentic": 0}}}
GRPO = {"max_steps": 2, "prompts_per_step": 2, "num_generations": 4, "max_completion_length": 80, "reward": "fraction",
        "learning_rate": 1e-3, "save_steps": 1}
SAME = [{"name": "low", "fraction": 1.0}, {"name": "high", "fraction": 1.0}]
BRUTE = ("n = int(input())\nxs = input().split()\n"
         "print(sum(1 for i in range(n) for j in range(i + 1, n) if xs[i] == xs[j]))")
EFFICIENT = ("from collections import Counter\ninput()\n"
             "print(sum(v * (v - 1) // 2 for v in Counter(input().split()).values()))")
WRONG = "from collections import Counter\ninput()\nprint(sum(v * v // 2 for v in Counter(input().split()).values()))"


def pairs_problem(pid: str) -> Problem:
    """Count equal pairs: the brute force passes the small tests and runs out of time on the big one."""
    rng = random.Random(pid)
    tests = []
    for n in (2, 5, 9, 40000):
        xs = [rng.randint(1, 20) for _ in range(n)]
        pairs = sum(v * (v - 1) // 2 for v in (xs.count(x) for x in set(xs)))
        tests.append(make_test(f"{n}\n{' '.join(map(str, xs))}\n", str(pairs), public=n == 2))
    return Problem(id=pid, source="toy", difficulty="easy", statement="Read n and n integers; print how many pairs "
                   "i < j have equal values.", testtype="stdin", tests=tuple(tests), time_limit_s=0.5,
                   meta={"solutions": {"brute": BRUTE, "efficient": EFFICIENT, "wrong": [WRONG]}})


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A study's directory once its one init (results/init/seed13/model, `ewa init`) and its calibration
    (results/calibration.json, `ewa calibrate`) are built; and the problems the init was SFT'd on."""
    root = tmp_path_factory.mktemp("study")
    problems = root / "train.jsonl"
    write_problems([pairs_problem("toy/pairs-a"), pairs_problem("toy/pairs-b")], problems)
    init = root / "results" / "init" / f"seed{INIT_SEED}" / "model"
    config = {"seed": INIT_SEED, "model": MODEL, "sandbox": {"backend": "auto"}}
    assert main(["init", "--config", json.dumps(config), "--problems", str(problems), "--out", str(init)]) == 0
    assert main(["calibrate", "--config", '{"sandbox": {"backend": "auto"}}', "--out",
                 str(root / "results" / "calibration.json")]) == 0
    return {"root": root, "init": init, "problems": problems}


def science_config(**science) -> dict:
    """configs/reduced.yaml as a science experiment of seeds 11 and 12 with the study's model section."""
    config = reduced_config()
    config["model"] = MODEL
    config["sandbox"] = {"backend": "auto", "calibrate": True}
    config["science"] = {"seeds": [11, 12], "design_seeds": [0], **science}
    return config


def dry_run(workdir, config: dict) -> subprocess.CompletedProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    return subprocess.run([str(BIN / "snakemake"), "science_all", "-n", "--profile", str(ROOT / "profiles" / "local"),
                           "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir), "--configfile",
                           str(workdir / "config.yaml")], cwd=ROOT, env=workflow_env(), capture_output=True,
                          text=True, timeout=240)


def job_counts(stdout: str) -> dict[str, int]:
    table = stdout.split("Job stats:")[1].split("total")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def commands(stdout: str, command: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("Shell command:") and f"{command} --" in line]


@pytest.mark.parametrize("science, sandbox, needle", [
    ({"init_seed": 11}, {}, "key 'science.init_seed': 11 is also in science.seeds"),
    ({"init_seed": 0}, {}, "key 'science.init_seed': 0 is also in science.design_seeds"),
    ({"init_from": "results/init/seed13/model"}, {}, "key 'science.init_from': needs science.init_seed"),
    ({}, {"calibrate": False, "calibration": "results/calibration.json"}, "key 'sandbox.calibration': given with"),
], ids=["a-report-seed", "a-design-seed", "from-without-seed", "calibration-uncalibrated"])
def test_config_refuses_an_init_seed_that_is_not_its_own(science, sandbox, needle):
    config = science_config(**science)
    config["sandbox"].update(sandbox)
    with pytest.raises(ConfigError, match=re.escape(needle)):
        validate(config)


@pytest.mark.timeout(300)
def test_the_study_builds_one_init_every_seed_starts_from(tmp_path):
    done = dry_run(tmp_path, science_config(init_seed=INIT_SEED))
    assert done.returncode == 0, done.stderr[-3000:]
    counts = job_counts(done.stdout)
    assert counts["shared_init"] == 1 and counts["shared_init_prepare"] == 1 and "init" not in counts
    (init,) = commands(done.stdout, "ewa init")
    assert f'"seed": {INIT_SEED}' in init and f"--out results/init/seed{INIT_SEED}/model" in init
    train = commands(done.stdout, "ewa train")
    assert len(train) == 4 and all(f"--init results/init/seed{INIT_SEED}/model " in c for c in train)
    assert {re.search(r"--out results/seed(\d+)/", c)[1] for c in train} == {"11", "12"}
    assert all("--calibration results/calibration.json" in c for c in train) and counts["calibrate"] == 1


@pytest.mark.timeout(300)
def test_a_control_starts_from_the_studys_init_and_calibration_or_refuses(study):
    control = study["root"] / "results" / "controls" / "same"
    init, calibration = f"../../../results/init/seed{INIT_SEED}/model", "../../../results/calibration.json"
    config = science_config(init_seed=INIT_SEED, init_from=init)
    config["sandbox"]["calibration"] = calibration
    done = dry_run(control, config)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = job_counts(done.stdout)
    assert not {"init", "shared_init", "calibrate"} & set(counts) and counts["train"] == 4
    for command in commands(done.stdout, "ewa train") + commands(done.stdout, "ewa sample"):
        assert f"--calibration {calibration} " in command
    assert all(f"--init {init} " in c for c in commands(done.stdout, "ewa train"))
    # an init built from another model section, a calibration file not there: one line naming the key
    config["model"] = {**MODEL, "sft": {**MODEL["sft"], "steps": 61}}
    refused = dry_run(control, config)
    assert refused.returncode != 0 and "Job stats" not in refused.stdout
    assert (f"config: key 'science.init_from': {init} was built from another model section (model.sft differ"
            in refused.stdout + refused.stderr)
    config["model"], config["sandbox"]["calibration"] = MODEL, "../calibration.json"
    refused = dry_run(control, config)
    assert "config: key 'sandbox.calibration': ../calibration.json: no such file" in refused.stdout + refused.stderr


def weights(path) -> dict:
    return load_file(str(path / "model.safetensors"))


def test_two_regimes_on_one_reward_train_apart_with_a_seed_stream(study, tmp_path):
    """The same-regimes control's null: one reward, one init, two GRPO seeds. Without seed_stream a regime
    trains on the replicate's seed, as every regime did before."""
    regimes = [SAME[0], {**SAME[1], "seed_stream": 1}]
    assert grpo_seed(7, SAME[1]) == 7 and grpo_seed(7, regimes[1]) not in (7, grpo_seed(8, regimes[1]))
    records = {}
    for regime in ("low", "high"):
        config = {"grpo": GRPO, "sandbox": {"backend": "auto"}, "regimes": regimes, "seed": 7}
        out = tmp_path / regime
        assert main(["train", "--init", str(study["init"]), "--problems", str(study["problems"]), "--regime", regime,
                     "--config", json.dumps(config), "--out", str(out)]) == 0
        records[regime] = json.loads((out / "ewa_train.json").read_text())
    assert records["low"]["grpo_seed"] == 7 and records["high"]["grpo_seed"] == grpo_seed(7, regimes[1])
    assert all(r["weights_changed"] and r["init_seed"] == INIT_SEED for r in records.values())
    assert records["low"]["init_fingerprint"] == records["high"]["init_fingerprint"]  # one init, two trainings
    low, high = weights(tmp_path / "low"), weights(tmp_path / "high")
    assert any(not low[name].equal(high[name]) for name in low)


def test_the_init_seed_is_registered_with_the_seeds_and_checked_before_a_run(tmp_path):
    registry = tmp_path / "registry.yaml"
    write_registry(registry, {"reports": [{"seeds": [120, 121]}], "withdrawn": [], "next": []})
    study, control = (validate(science_config(init_seed=INIT_SEED)) for _ in range(2))
    control["science"]["seeds"] = [21, 22]
    register(registry, {"study.yaml": study, "control.yaml": control}, "c0ffee", "2026-11-27")
    assert [(e["seeds"], e["init_seed"]) for e in read_registry(registry)["next"]] == [([11, 12], 13), ([21, 22], 13)]
    check_ready(registry, {"study.yaml": study}, "c0ffee", [], tmp_path)
    study["science"]["init_seed"] = 14
    with pytest.raises(RegistryError, match="study.yaml: init seed 14 is not the registered 13"):
        check_ready(registry, {"study.yaml": study}, "c0ffee", [], tmp_path)
    # the init of seed 120 is the one its report's replicate built: seen, so no fresh init
    study["science"]["init_seed"] = 120
    with pytest.raises(RegistryError, match="init seed 120 was reported before"):
        register(registry, {"study.yaml": study}, "c0ffee")
    study["science"]["init_seed"] = 21
    with pytest.raises(RegistryError, match="init seed 21 is registered as a report seed of control.yaml"):
        register(registry, {"study.yaml": study}, "c0ffee")
    # a control that starts from the study's init names that init's directory; another seed's is refused
    # at registration, before the study runs, not when the control's own workflow starts after it
    study["science"]["init_seed"] = 13
    control["science"]["init_from"] = "../../../results/init/seed12/model"
    with pytest.raises(RegistryError, match=r"control.yaml: science.init_from \.\./\.\./\.\./results/init/seed12/model "
                                            r"is the init of seed 12, not of init seed 13"):
        register(registry, {"control.yaml": control}, "c0ffee")
    control["science"]["init_from"] = "../../../results/init/seed13/model"
    register(registry, {"control.yaml": control}, "c0ffee")
