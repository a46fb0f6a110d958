"""Watching a run: the progress reporter's lines, rates and ETA; the training figures from the files the
jobs write; `ewa status` on a run killed midway, on a finished run, and its ETA arithmetic."""
from __future__ import annotations

import io

import pandas as pd
import pytest

from ewa.cli import main
from ewa.progress import Progress, progress_path, read_progress
from ewa.train.grpo import METRICS, VERDICT_COLUMNS


class Clock:
    """A clock a test moves by hand."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_progress_lines_come_at_the_rarer_of_30_s_and_a_tenth_with_rates_and_eta(tmp_path):
    clock, stream = Clock(), io.StringIO()
    out = tmp_path / "results" / "seed0" / "samples" / "alpha+0.50" / "mini" / "reasoning.jsonl"
    p = Progress("sample", 100, "problems", out=out, counters={"tokens": "tokens"}, stream=stream, interval=30,
                 clock=clock, wall=clock, label="ewa sample alpha+0.50 mini/reasoning")
    p.start(heartbeat=False)
    for _ in range(40):  # 40 problems in 20 s: a tenth is done often, but 30 s have not passed
        clock.now += 0.5
        p.update(1, tokens=50)
    clock.now += 10  # 30 s since the start line and 40% more done: one line
    p.update(1, tokens=50)
    clock.now += 30  # 30 s more, but only 1% more: none
    p.update(1, tokens=50)
    lines = stream.getvalue().splitlines()
    assert lines == ["ewa sample alpha+0.50 mini/reasoning: 0/100 problems (0%) | starting",
                     "ewa sample alpha+0.50 mini/reasoning: 41/100 problems (41%) | 1.37 problems/s, 68.3 tokens/s "
                     "| 30s, ETA 43s"]
    record = read_progress(progress_path(out))
    assert record == read_progress(tmp_path / "logs/progress/seed0/samples/alpha+0.50/mini/reasoning.jsonl.json")
    assert (record["state"], record["done"], record["total"], record["eta_s"]) == ("running", 42, 100, pytest.approx(58 / 42 * 60, abs=1e-3))
    with pytest.raises(RuntimeError):
        with p:
            raise RuntimeError("out of memory\nmore")
    record = read_progress(progress_path(out))
    assert (record["state"], record["error"]) == ("failed", "out of memory")


def metrics_csv(directory, rewards, ac, tle, wa, no_code, completions=8):
    """A checkpoint's metrics.csv as `ewa train` writes it (ewa.train.grpo.metrics_frame's columns)."""
    directory.mkdir(parents=True)
    steps = range(1, len(rewards) + 1)
    rows = []
    for step, r, a, t, w, n in zip(steps, rewards, ac, tle, wa, no_code):
        row = {"step": step, **{c: 0.0 for c in METRICS}, **{f"verdict_{v}": 0 for v in VERDICT_COLUMNS}}
        row.update(reward=r, frac_reward_zero_std=1 - r, kl=0.001 * step, completion_length=40 + step,
                   completions=completions, verdict_AC=a, verdict_TLE=t, verdict_WA=w, verdict_CE=n,
                   verdict_no_code=n)
        rows.append(row)
    pd.DataFrame(rows).to_csv(directory / "metrics.csv", index=False)
    return directory


def test_training_figures_per_regime_and_over_seeds(tmp_path):
    low = metrics_csv(tmp_path / "ck/low", [0.25, 0.5, 0.5], [2, 4, 4], [4, 3, 3], [1, 1, 0], [1, 0, 1])
    high = metrics_csv(tmp_path / "ck/high", [0.0, 0.125, 0.25], [0, 1, 2], [6, 4, 2], [1, 2, 4], [1, 1, 0])
    init = tmp_path / "init"
    init.mkdir()
    pd.DataFrame({"step": [25, 50], "loss": [2.0, 0.1]}).to_csv(init / "sft_metrics.csv", index=False)
    out = tmp_path / "training"
    assert main(["training", "--config", '{"seed": 3}', "--checkpoints", f"low={low}", f"high={high}",
                 "--init", str(init), "--out-dir", str(out)]) == 0
    for name in ("low.png", "high.png", "sft.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    table = pd.read_csv(out / "training.csv")
    assert list(table["regime"]) == ["low"] * 3 + ["high"] * 3
    assert table.loc[0, ["share_AC", "share_optimization", "share_correctness", "share_no_code"]].tolist() == \
        [0.25, 0.5, 0.125, 0.125]
    # across seeds: the median and the band of each curve
    second = tmp_path / "seed1.csv"
    table.assign(reward=table["reward"] + 0.5).to_csv(second, index=False)
    third = tmp_path / "seed2.csv"
    table.assign(reward=table["reward"] + 0.25).to_csv(third, index=False)
    seeds = tmp_path / "science"
    assert main(["training", "--tables", f"0={out / 'training.csv'}", f"1={second}", f"2={third}",
                 "--out-dir", str(seeds)]) == 0
    summary = pd.read_csv(seeds / "training.csv")
    first = summary[(summary["regime"] == "low") & (summary["curve"] == "reward") & (summary["step"] == 1)].iloc[0]
    assert (first["median"], first["lo"], first["hi"], first["seeds"]) == (0.5, 0.25, 0.75, 3)
    assert (seeds / "training.png").read_bytes()[:4] == b"\x89PNG"


def test_training_figures_refuse_a_directory_without_metrics(tmp_path, capsys):
    (tmp_path / "low").mkdir()
    assert main(["training", "--checkpoints", f"low={tmp_path / 'low'}", "--out-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"ewa training: error: --checkpoints low: {tmp_path / 'low'} has no metrics.csv (not a checkpoint of ewa train)"


def job(rule, state="pending", **progress):
    from ewa.status import Job

    return Job(rule, [f"results/{rule}/{len(progress)}"], None, state != "done", state=state,
               progress={"state": progress.pop("file_state", "running"), **progress} if progress else None)


def test_status_eta_is_measured_time_else_the_plan_scaled_by_what_was_measured():
    """Train: one finished job took 400 s (its plan says 200); one runs with 100 s left, one with 200 s.
    Sample: running jobs project 60 s a job (plan 30): the plan is 2x optimistic, so evaluate's planned 50 s
    becomes 100 s. Frontier has neither: left out, and named."""
    from ewa.status import eta, measured_per_job

    jobs = [job("init", "done"), job("train", "done", file_state="done", elapsed_s=400.0),
            job("train", "running", elapsed_s=50.0, eta_s=100.0), job("train", "running", elapsed_s=20.0, eta_s=200.0),
            job("sample", "running", elapsed_s=40.0, eta_s=20.0), *[job("sample") for _ in range(3)],
            job("evaluate"), job("evaluate"), job("frontier")]
    measured = measured_per_job(jobs)
    assert measured == {"train": 400.0, "sample": 60.0}
    planned = {"train": 200.0, "sample": 30.0, "evaluate": 50.0}
    est = eta(jobs, measured, planned)
    assert est.correction == 2.0 and est.per_job_s["evaluate"] == 100.0 and est.source["evaluate"] == "plan x2"
    assert est.slots == 3 and est.unknown == {"frontier": 1}
    left = 100 + 200 + 20 + 3 * 60 + 2 * 100  # running jobs' own ETAs, then pending jobs' time per job
    assert est.eta_s == pytest.approx(left / 3)
    assert eta(jobs, measured, planned, slots=1).eta_s == pytest.approx(left)
    assert eta(jobs, measured, planned, slots=100).eta_s == 200.0  # never before the longest running job ends
    assert eta([job("frontier")], {}, {}).eta_s is None  # nothing to go by
