"""Training that cannot learn says so. GRPO on a model that solves nothing (a random pico init: no code,
reward 0 for every completion) gets no signal and leaves the weights bit-identical to the init: the
train job names it in one line and records `weights_changed: false`, the merge job names identical
endpoints, and every claim over them reads "untestable (endpoints identical)"."""
from __future__ import annotations

import json
import logging
import shutil

import pandas as pd
import pytest
from safetensors.torch import load_file, save_file

from helpers import PICO_WIDE, REGIMES, alpha_specs, write_design
from test_train import GRPO, pairs_problem, train_argv

from ewa.cli import main
from ewa.problems import write_problems
from ewa.train.outcome import endpoints, first_difference
from ewa.train.signal import group_signal, warning

IDENTICAL = "untestable (endpoints identical)"


@pytest.fixture(scope="module")
def untrainable(tmp_path_factory):
    """A random pico init (no warm start: it writes no code) and its GRPO checkpoint for regime high."""
    root = tmp_path_factory.mktemp("untrainable")
    problems = root / "train.jsonl"
    write_problems([pairs_problem("toy/pairs-a"), pairs_problem("toy/pairs-b")], problems)
    init = root / "init"
    config = {"seed": 0, "model": {"init": "tiny", "tiny": PICO_WIDE, "sft": {"steps": 0}}}
    assert main(["init", "--config", json.dumps(config), "--problems", str(problems), "--out", str(init)]) == 0
    return init, problems, root


def test_grpo_without_signal_leaves_the_init_and_says_so_in_one_line(untrainable, caplog, capsys):
    init, problems, root = untrainable
    out = root / "checkpoints" / "high"
    with caplog.at_level(logging.WARNING, logger="ewa.train.outcome"):
        assert main(train_argv(init, problems, out)) == 0
    metrics = pd.read_csv(out / "metrics.csv")
    assert (metrics["reward"] == 0).all() and (metrics["frac_reward_zero_std"] == 1).all()  # GRPO saw no signal
    record = json.loads((out / "ewa_train.json").read_text())
    assert record["weights_changed"] is False and record["first_changed_tensor"] is None
    assert record["steps_with_signal"] == 0 and record["mean_reward"] == 0
    assert record["first_step"] == {"mixed_share": 0.0, "mean_reward": 0.0}
    assert first_difference(init, out) is None  # the real check, on the real files
    # one line after the first step (the init's own samples never mixed), one at the end naming the outcome
    warnings = [r.getMessage() for r in caplog.records if r.name == "ewa.train.outcome"]
    assert len(warnings) == 2 and not any("\n" in w for w in warnings)
    assert warnings[0].startswith("regime high: no group of GRPO's first step had mixed rewards (mean reward 0.000")
    assert warnings[1].startswith("regime high: the trained weights are identical to the init after 3 steps")
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["weights_changed"] is False


def endpoint_pair(root, trained):
    """low and high checkpoints from one untrained run (the regimes' records say they never moved)."""
    low = root / "pair" / "low"
    shutil.copytree(trained, low)
    record = json.loads((low / "ewa_train.json").read_text())
    record["regime"] = {"name": "low", "fraction": 0.5}
    (low / "ewa_train.json").write_text(json.dumps(record))
    return low, trained


def perturbed(model_dir, out):
    """A copy of model_dir with one weight changed and no train record: compared tensor by tensor."""
    shutil.copytree(model_dir, out)
    (out / "ewa_train.json").unlink()
    tensors = load_file(out / "model.safetensors")
    name = sorted(tensors)[-1]
    tensors[name] = tensors[name] + 1e-3
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    return out, name


def test_merge_and_claims_name_identical_endpoints(untrainable, tmp_path, capsys):
    init, problems, root = untrainable
    trained = root / "checkpoints" / "high"
    if not (trained / "ewa_train.json").is_file():
        assert main(train_argv(init, problems, trained)) == 0
    low, high = endpoint_pair(tmp_path, trained)
    state = endpoints(low, high)
    assert state.identical and state.unchanged == ("low", "high") and state.untestable == IDENTICAL
    # the merge job says so in one line (its log), and merges anyway: the grid is still the user's to look at
    capsys.readouterr()
    assert main(["merge", str(low), str(high), "--alpha", "0.5", "--out", str(tmp_path / "merged")]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(err) == 1 and err[0].startswith("ewa merge: warning: the low and high checkpoints are identical")
    # endpoints without train records are compared tensor by tensor
    other, name = perturbed(high, tmp_path / "other")
    assert first_difference(high, other) == name
    assert not endpoints(tmp_path / "merged", other).identical
    copy = tmp_path / "copy"
    shutil.copytree(other, copy)
    assert endpoints(other, copy).identical and endpoints(other, copy).unchanged == ()
    # one endpoint moved and the other never left the init: not two coverage regimes either
    moved = endpoints(high, other)
    assert not moved.identical and moved.untestable == "untestable (high unchanged from the init)"
    # every claim over the identical endpoints reads untestable, with the reason; the values are kept
    paths, design_problems = write_design(tmp_path / "design")
    evals = alpha_specs(paths)
    frontier = tmp_path / "frontier"
    assert main(["frontier", "--evals", *evals, "--problems", str(design_problems), "--bootstrap", "0",
                 "--formats", "--out-dir", str(frontier)]) == 0
    out = tmp_path / "claims"
    capsys.readouterr()
    assert main(["claims", "--evals", *evals, "--ensembles", str(frontier / "ensembles.csv"), "--problems",
                 str(design_problems), "--bootstrap", "0", "--endpoints", str(low), str(high),
                 "--out-dir", str(out)]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[0].startswith(f"every claim is {IDENTICAL}: the low and high checkpoints are identical")
    claims = pd.read_csv(out / "claims.csv")
    assert (claims["verdict"] == IDENTICAL).all() and claims["note"].str.contains("every alpha is the same model").all()
    assert claims["value"].notna().sum() >= 9
    recorded = json.loads((out / "provenance.json").read_text())["endpoints"]
    assert recorded["identical"] and recorded["unchanged"] == ["low", "high"]
    assert "nan" not in (out / "claims.html").read_text().lower()


def test_signal_before_training_warns_when_grpo_cannot_move(untrainable, capsys):
    """`ewa signal` samples the init as GRPO would (its group size, temperature and length) with the project's
    sampler and judges each group with each regime's training reward in the sandbox: a model that writes no
    code has no mixed group, and each regime gets one warning line."""
    init, problems, root = untrainable
    out = root / "signal"
    config = {"grpo": GRPO, "sandbox": {"backend": "bwrap"}, "regimes": REGIMES, "seed": 0,
              "sample": {"batch_size": 8}}
    capsys.readouterr()
    assert main(["signal", "--config", json.dumps(config), "--init", str(init), "--problems", str(problems),
                 "--prompts", "2", "--out", str(out)]) == 0
    said = capsys.readouterr()
    record = json.loads((out / "signal.json").read_text())
    assert record["k"] == GRPO["num_generations"] and sorted(record["prompts"]) == ["toy/pairs-a", "toy/pairs-b"]
    assert record["config"]["grpo"]["max_completion_length"] == GRPO["max_completion_length"] and record["versions"]
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2 * GRPO["num_generations"] and {s["setting"] for s in samples} == {"reasoning"}
    for name in ("low", "high"):
        s = record["regimes"][name]
        assert (s["prompts"], s["mixed"], s["mixed_share"], s["mean_reward"], s["solved"]) == (2, 0, 0.0, 0.0, 0)
        assert sum(s["verdicts"][v] for v in ("AC", "WA", "TLE", "MLE", "RE", "CE")) == len(samples)
    warnings = said.err.strip().splitlines()[-2:]
    assert [w.split(":")[2].strip() for w in warnings] == ["regime low", "regime high"]
    assert all("0 of 2 prompts had mixed rewards" in w and "GRPO cannot move" in w for w in warnings)
    assert said.out.splitlines()[-2].startswith("regime low: 0 of 2 prompts with mixed rewards over 2 samples")


def test_group_signal_counts_mixed_groups():
    signal = group_signal({"a": [0.0, 0.0, 0.0], "b": [1.0, 0.0, 0.0], "c": [1.0, 1.0, 1.0], "d": [0.5, 0.5, 1.0]})
    assert (signal["mixed"], signal["solved"], signal["prompts"]) == (2, 3, 4)
    assert signal["mean_reward"] == pytest.approx(6.0 / 12)
    # half a mixed group per GRPO step is where the warning starts
    assert warning("low", signal, 3, per_step=1) is None  # 0.5 per step
    assert warning("low", {**signal, "mixed": 1, "mixed_share": 0.25}, 3, per_step=1).startswith(
        "regime low: 1 of 4 prompts had mixed rewards over 3 samples")


@pytest.mark.parametrize("argv, needle", [
    (["--k", "1"], "--k must be >= 2"),
    (["--regime", "medium"], "--regime: unknown regime 'medium'"),
])
def test_signal_bad_input_is_one_line(untrainable, tmp_path, capsys, argv, needle):
    init, problems, _ = untrainable
    out = tmp_path / "signal"
    assert main(["signal", "--config", json.dumps({"regimes": REGIMES}), "--init", str(init), "--problems",
                 str(problems), "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and not out.exists()
