"""Merge families (ewa.families, ewa.analysis.families): trajectory and simplex points tensor by tensor against
numpy, the config's one-line errors, shared points built once and one new point building only its own jobs
(real Snakemake dry runs), and the family comparison's CI covering the truth in a simulation."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from safetensors.torch import load_file
from transformers import Qwen2Config, Qwen2ForCausalLM

from helpers import BIN, ROOT, reduced_config, workflow_copy, workflow_env, write_design

from ewa.analysis.bootstrap import bootstrap_counts, weighted_samples
from ewa.analysis.ensemble import ensemble_pass, family_folds
from ewa.analysis.families import FamilySettings, comparison_table, ensembles_table, hypervolume, output_files
from ewa.cli import main as ewa_main
from ewa.config import validate
from ewa.errors import ConfigError
from ewa.families import family_spec, merge_plan, model_points, simplex_lattice

THREE = [{"name": "low", "fraction": 0.5}, {"name": "mid", "fraction": 0.75}, {"name": "high", "fraction": 1.0}]


# --- tensors -----------------------------------------------------------------------------------------

def make_pico(path: Path, seed: int) -> Path:
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    Qwen2ForCausalLM(config).save_pretrained(path)
    return path


def numpy_tensors(model_dir: Path) -> dict[str, np.ndarray]:
    out = {}
    for file in sorted(Path(model_dir).glob("*.safetensors")):
        out.update({k: v.double().numpy() for k, v in load_file(file).items()})
    return out


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    return {name: make_pico(root / name, seed) for seed, name in enumerate(("init", "low", "mid", "high"))}


def merge_point(point, sources, out: Path) -> dict[str, np.ndarray]:
    """The point merged the way rule merge_point does it: `ewa merge-point`, base first (ewa.families.merge_plan)."""
    base, rest = merge_plan(point)
    args = ["merge-point", f"--source={point.weight(base)!r}:{sources[base]}"]
    args += [f"--source={w!r}:{sources[source]}" for source, w in rest]
    assert ewa_main([*args, "--out", str(out), "--device", "cpu"]) == 0
    return numpy_tensors(out)


def test_a_trajectory_point_is_init_plus_alpha_times_the_update(sources, tmp_path):
    cfg = validate({"regimes": THREE, "merge": {"alphas": [0.0, 1.0], "families": [
        {"from": "init", "to": "high", "alphas": [0.0, 1.5, 2.0]}]}})
    points = model_points(cfg)
    assert "@init+1.00" in points and "+1.00" in points  # alpha 0 is the init, alpha 1 the high checkpoint
    init, high = numpy_tensors(sources["init"]), numpy_tensors(sources["high"])
    for alpha, tag in ((1.5, "@init-0.50,high+1.50"), (2.0, "@init-1.00,high+2.00")):
        merged = merge_point(points[tag], sources, tmp_path / tag)
        assert merged.keys() == init.keys()
        for name, theta in merged.items():
            np.testing.assert_allclose(theta, init[name] + alpha * (high[name] - init[name]), rtol=1e-5, atol=1e-6,
                                       err_msg=name)


def test_a_simplex_point_is_its_weighted_sum(sources, tmp_path):
    cfg = validate({"regimes": THREE, "merge": {"alphas": [0.0, 1.0], "families": [
        {"regimes": ["low", "mid", "high"], "points": [[-0.5, 1.0, 0.5], [0.25, 0.25, 0.5]]}]}})
    theta = {s: numpy_tensors(sources[s]) for s in ("low", "mid", "high")}
    for weights, tag in (((-0.5, 1.0, 0.5), "@low-0.50,mid+1.00,high+0.50"),
                         ((0.25, 0.25, 0.5), "@low+0.25,mid+0.25,high+0.50")):
        merged = merge_point(model_points(cfg)[tag], sources, tmp_path / tag)
        for name, value in merged.items():
            expected = sum(w * theta[s][name] for w, s in zip(weights, ("low", "mid", "high")))
            np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6, err_msg=name)


# --- the config --------------------------------------------------------------------------------------

@pytest.mark.parametrize("family, message", [
    ({"from": "init", "to": "top", "alphas": [1.5]}, r"merge.families\[0\].to': 'top' is not one of"),
    ({"from": "base", "to": "high", "alphas": [1.5]}, r"merge.families\[0\].from': 'base' is not one of"),
    ({"regimes": ["low", "mid", "top"], "step": 0.5}, r"merge.families\[0\].regimes\[2\]': 'top' is not"),
    ({"regimes": ["low", "mid", "high"], "points": [[0.5, 0.5, 0.5]]}, r"points\[0\]': weights .* sum to 1.5, not 1"),
    ({"regimes": ["low", "mid", "high"], "points": [[0.5, 0.5]]}, r"points\[0\]': 2 weights for 3 regimes"),
    ({"regimes": ["low", "mid", "high"], "points": [[0, 1, 0], [0, 1, 0]]}, r"point @mid\+1.00 is given twice"),
    ({"from": "init", "to": "high", "alphas": [0.5, 0.5]}, r"duplicate alphas"),
    ({"from": "init", "to": "high", "alphas": [0.125]}, r"needs more than two decimals"),
    ({"regimes": ["low", "high"], "step": 0.5}, r"three or more distinct sources"),
    ({"regimes": ["low", "mid", "high"], "step": 0.3}, r"1/step must be a whole number"),
    ({"regimes": ["low", "mid", "high"], "step": 0.5, "alphas": [1]}, r"a line \(from, to, alphas\) or a simplex"),
    ({"name": "low-high", "from": "low", "to": "high", "alphas": [3.0]}, r"family 'low-high' is named twice"),
    ({"to": "high", "alphas": [1], "wieghts": 1}, r"unknown key 'merge.families\[0\].wieghts'"),
])
def test_a_bad_family_is_one_line_naming_the_key(family, message):
    with pytest.raises(ConfigError, match=message) as info:
        validate({"regimes": THREE, "merge": {"families": [family]}})
    assert "\n" not in str(info.value) and str(info.value).startswith("config: ")


def test_the_lattice_and_the_tags_of_the_beyond_config():
    assert len(simplex_lattice(3, 0.5, 0.0)) == 6 and len(simplex_lattice(3, 0.5, 0.5)) == 21
    assert all(abs(sum(w) - 1) < 1e-12 and min(w) >= -0.5 for w in simplex_lattice(3, 0.5, 0.5))
    cfg = validate(yaml.safe_load((ROOT / "configs" / "beyond.yaml").read_text()))
    points = model_points(cfg)
    spec = family_spec(cfg)
    named = [p["tag"] for f in spec["families"] for p in f["points"]]
    assert len(named) == 5 + 5 + 5 + 21 and len(points) == 28 == len(set(named))
    # the simplex's low-high edge is the alpha line, and the trajectories end on its endpoints
    edge = {p["tag"] for p in spec["families"][3]["points"] if "mid" not in p["weights"]}
    assert edge == {"-0.50", "+0.00", "+0.50", "+1.00", "+1.50"}
    assert {p["tag"] for p in spec["families"][1]["points"]} & {p["tag"] for p in spec["families"][2]["points"]} \
        == {"@init+1.00"}
    assert "families" not in validate({})["merge"]  # the default config holds no key: its sha256 is unchanged


def plan_json(capsys, *args) -> dict:
    capsys.readouterr()
    assert ewa_main(["plan", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_plan_prices_every_family_point(capsys):
    rules = plan_json(capsys, "--configfile", str(ROOT / "configs" / "beyond.yaml"))["rules"]
    assert rules["sample"]["jobs"] == rules["evaluate"]["jobs"] == 28  # one setting
    assert rules["merge"]["jobs"] == 5 + 21 and rules["train"]["jobs"] == 3
    model = ROOT / "tests" / "fixtures" / "models" / "Qwen2.5-Coder-7B-Instruct"
    paper = ["--configfile", str(ROOT / "configs" / "paper-7b.yaml"), "--model-config", str(model)]
    before = plan_json(capsys, *paper)["rules"]
    after = plan_json(capsys, *paper, "--families", "[{from: init, to: cov100, alphas: [0.0, 1.5, 2.0]}, "
                      "{regimes: [cov25, cov50, cov100], points: [[0, 1, 0], [-0.5, 1, 0.5]]}]")["rules"]
    # the init, 1.5 and 2.0 on the trajectory (1.0 is the line's); cov50 itself and one blend on the plane
    assert after["sample"]["jobs"] == before["sample"]["jobs"] // 17 * (17 + 5)
    assert after["merge"]["jobs"] == 17 + 3 and after["train"]["jobs"] == 3  # cov50 is trained now
    assert any("merge.families adds 5 models" in d for d in after["merge"]["details"])


# --- the workflow ------------------------------------------------------------------------------------

def snakemake(workdir: Path, *args) -> str:
    done = subprocess.run([str(BIN / "snakemake"), "--cores", "2", *args], cwd=workdir, env=workflow_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def planned(workdir: Path, *targets) -> dict[tuple[str, str], tuple[str, str]]:
    """(rule, wildcards) -> (inputs, shell command) of every job a dry run plans from scratch: what
    Snakemake's rerun triggers compare (the input set, the parameters inside the command)."""
    jobs, job = {}, None
    for line in snakemake(workdir, "-n", "-p", "-F", *targets).splitlines():
        line = line.strip()
        if m := re.match(r"(?:local)?rule (\w+):", line):
            job = {"rule": m[1], "wildcards": "", "input": ""}
        elif job and line.startswith(("input: ", "wildcards: ")):
            key, _, value = line.partition(": ")
            job[key] = value
        elif job and line.startswith("Shell command: "):
            if job["rule"] != "all":
                jobs[job["rule"], job["wildcards"]] = (job["input"], line)
            job = None
    return jobs


def families_config() -> dict:
    cfg = reduced_config()
    cfg["regimes"] = THREE
    cfg["sample"]["settings"] = ["reasoning"]
    cfg["merge"]["alphas"] = [0.0, 0.5, 1.0]
    cfg["merge"]["families"] = [{"from": "init", "to": "high", "alphas": [0.0, 1.0, 1.5]},
                                {"from": "init", "to": "low", "alphas": [0.0, 1.0, 1.5]},
                                {"regimes": ["low", "mid", "high"], "step": 0.5}]
    return cfg


def test_shared_points_are_built_once_and_a_new_point_builds_only_its_jobs(tmp_path):
    cfg = families_config()
    jobs = planned(workflow_copy(tmp_path / "before", cfg))
    models = {re.search(r"tag=(.*?), benchmark", w)[1] for r, w in jobs if r == "sample"}
    merges = [w for r, w in jobs if r in ("merge", "merge_point")]
    # line 3 + trajectories (the init, 2 x alpha 1.5) + the simplex's 6 lattice points, 3 of them on the line
    assert len(models) == 3 + 3 + 3 == len([w for r, w in jobs if r == "evaluate"])
    assert len(merges) == len(set(merges)) == 3 + 2 + 2  # the init and the mid checkpoint are sampled as they are
    assert not any("@init+1.00" in w or "@mid+1.00" in w for w in merges)
    assert "results/seed0/init, results/seed0/data" in jobs["sample", "seed=0, tag=@init+1.00, benchmark=mini, "
                                                                       "setting=reasoning"][0]
    assert [r for r, _ in jobs].count("families") == 1
    # one more point: its own jobs are new, and of the jobs already there only the comparison's input changes
    # and the front page's (it shows the config's merges, as for a new alpha)
    cfg["merge"]["families"][0]["alphas"].append(2.0)
    after = planned(workflow_copy(tmp_path / "after", cfg))
    changed = {job for job, definition in after.items() if jobs.get(job) != definition}
    point = "tag=@init-1.00,high+2.00"
    assert changed == {("merge_point", f"seed=0, {point}"),
                       ("sample", f"seed=0, {point}, benchmark=mini, setting=reasoning"),
                       ("evaluate", f"seed=0, {point}, benchmark=mini, setting=reasoning"),
                       ("families", "seed=0, benchmark=mini, setting=reasoning"), ("front_page", "seed=0")}
    assert set(jobs) <= set(after)


# --- the analysis ------------------------------------------------------------------------------------

def test_families_writes_every_declared_file(tmp_path):
    paths, problems = write_design(tmp_path)
    tags = ["-0.50", "+0.00", "+0.50", "+1.00", "+1.50"]
    spec = {"sources": ["init", "low", "high"], "families": [
        {"name": "low-high", "kind": "line", "sources": ["low", "high"],
         "points": [{"tag": t, "coords": [float(t)], "weights": {"low": 1 - float(t), "high": float(t)}} for t in tags]},
        {"name": "init-high", "kind": "trajectory", "sources": ["init", "high"],
         "points": [{"tag": t, "coords": [float(t)], "weights": {"init": 1 - float(t), "high": float(t)}}
                    for t in tags[:3]]}]}
    assert ewa_main(["families", "--config", json.dumps({"evaluate": {"bootstrap": 50, "k": [1, 4], "budget": 4}}),
                     "--families", json.dumps(spec), "--evals", *[f"point={t}:{p}" for t, p in zip(tags, paths)],
                     "--problems", str(problems), "--out-dir", str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(output_files())
    comparison = pd.read_csv(tmp_path / "out" / "comparison.csv")
    (row,) = comparison.to_dict("records")
    assert row["hv_diff_lo"] <= row["hv_diff"] <= row["hv_diff_hi"] and not row["equal_budget"]
    points = pd.read_csv(tmp_path / "out" / "families.csv")
    assert len(points) == 8 and set(points.family) == {"low-high", "init-high"}


def test_hypervolume_by_hand():
    assert hypervolume(np.array([[0.5, 0.5]])) == 0.25
    assert hypervolume(np.array([[0.5, 0.5], [0.6, 0.6], [np.nan, 0.1], [1.2, 0.0]])) == 0.25
    assert hypervolume(np.array([[0.2, 0.6], [0.5, 0.3]])) == pytest.approx(0.3 * 0.4 + 0.5 * 0.7)
    assert hypervolume(np.empty((0, 2))) == 0.0


def test_the_comparison_ci_covers_the_true_difference(tmp_path):
    """Two families of three points; problems come in families of two siblings that share their type. The
    true hypervolumes are those of the population's mean rates; the 90% CI of the difference must cover it
    about 90% of the time."""
    # per point and problem type: (correctness-, optimization-failure probability)
    types = np.array([[[0.10, 0.60], [0.25, 0.35], [0.45, 0.15]],   # family a, type 0
                      [[0.20, 0.70], [0.35, 0.45], [0.55, 0.25]],   # family a, type 1
                      [[0.15, 0.65], [0.30, 0.45], [0.50, 0.20]],   # family b, type 0
                      [[0.25, 0.70], [0.40, 0.50], [0.60, 0.25]]])  # family b, type 1
    probs = np.concatenate([types[:2], types[2:]], axis=1)  # (type, point, 2)
    truth_xy = probs.mean(0)
    spec = {"families": [{"name": "a", "kind": "line", "points": [{"tag": f"a{i}"} for i in range(3)]},
                         {"name": "b", "kind": "trajectory", "points": [{"tag": f"b{i}"} for i in range(3)]}]}
    tags = ["a0", "a1", "a2", "b0", "b1", "b2"]
    truth = hypervolume(truth_xy[:3]) - hypervolume(truth_xy[3:])
    rng = np.random.default_rng(0)
    clusters, n, ci, covered, reps = 40, 16, 0.90, 0, 100
    for rep in range(reps):
        kind = np.repeat(rng.integers(0, 2, clusters), 2)  # siblings share their type
        p = probs[kind]  # (P, M, 2)
        share = rng.multinomial(n, np.stack([p[..., 0], p[..., 1], 1 - p.sum(-1)], -1).reshape(-1, 3)) / n
        xy = share.reshape(len(kind), 6, 3)[..., :2]
        boot = bootstrap_counts(np.repeat(np.arange(clusters), 2), 200, rep)
        boot_xy = weighted_samples(xy, np.ones_like(xy), boot)
        row = comparison_table(spec, tags, xy.mean(0), boot_xy, ci, n).iloc[0]
        covered += row.hv_diff_lo <= truth <= row.hv_diff_hi
    assert 0.80 <= covered / reps <= 0.98, (covered, reps, truth)


# --- ensembles -----------------------------------------------------------------------------------------

def test_family_ensembles_cross_fit_every_problem_under_a_choice_made_on_the_other_folds():
    """With evaluate.folds K the families' ensembles score every problem, each fold by the single point
    chosen on the other folds (checked by hand here); with 0 they score one test split, as before."""
    rng = np.random.default_rng(7)
    P, budget, tags = 45, 2, ["l0", "l1", "l2", "t0", "t1"]
    spec = {"families": [{"name": "line", "points": [{"tag": t} for t in tags[:3]]},
                         {"name": "trajectory", "points": [{"tag": t} for t in tags[3:]]}]}
    n = np.full((P, len(tags)), 8)
    c = rng.integers(0, 9, size=(P, len(tags)))
    families = np.array([f"fam{i % 9}" for i in range(P)])
    clusters = np.unique(families, return_inverse=True)[1].ravel()
    settings = dict(k=(1,), bootstrap=30, ci=0.95, seed=3, cluster_by="family", budget=budget, dev_fraction=0.5)

    folded = ensembles_table(spec, tags, n, c, families, FamilySettings(**settings, folds=3), clusters)
    assert set(folded.n_test_problems) == {P}
    by_hand = np.empty(P)
    for dev, test in family_folds(families, 3, seed=3):
        assert not set(families[dev]) & set(families[test])  # a family is never on both sides
        means = [ensemble_pass(n[dev][:, [a]], c[dev][:, [a]], np.array([budget])).mean() for a in range(3)]
        best = int(np.argmax(means))
        by_hand[test] = ensemble_pass(n[test][:, [best]], c[test][:, [best]], np.array([budget]))
    line = folded[(folded.family == "line") & (folded.kind == "best_single_dev")].iloc[0]
    assert line.pass_at_budget == pytest.approx(by_hand.mean())
    assert line.gain_vs_line_single == pytest.approx(0.0)

    split = ensembles_table(spec, tags, n, c, families, FamilySettings(**settings), clusters)
    assert set(split.n_test_problems) == {25}  # one split: 4 of the 9 families choose, the other 5 are scored
    assert list(split.columns) == list(folded.columns)
    one = ensembles_table(spec, tags, n, c, np.array(["fam"] * P), FamilySettings(**settings), clusters)
    assert one.empty and list(one.columns) == list(folded.columns)  # one family: nothing left to score on
