"""Pre-registration a machine checks (ewa.analysis.registry): every job's provenance names its commit and
experiment, and `ewa science` refuses a seed whose outputs were made elsewhere or that a report has shown,
on files written by `ewa frontier`, `ewa claims` and `ewa approaches` and commits of a real git repository.
The negative controls of `make science`: their configs, their dry runs, the Makefile's target and the
controls section of docs/results.md."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import BIN, DESIGN, ROOT, alpha_specs, write_approach_samples, write_design

import ewa.io
from ewa.alphas import alpha_tag
from ewa.analysis.registry import (RegistryError, check_ready, experiment_sha256, read_registry, record_report,
                                   register, write_registry)
from ewa.analysis.science import CONTROLS, write_science
from ewa.cli import main
from ewa.config import load

CONTROL_CONFIGS = sorted((ROOT / "configs").glob("control-*.yaml"))
# What a control may change besides its one change: its own seeds and the study's calibration read from the
# study's run; and where its change is not the init, the study's init (init_from). It runs every setting.
CONTROL_FREEDOM = {("science", "seeds"), ("sandbox", "calibration")}
CONTROL_CHANGE = {"same-regimes": {("regimes",)}, "no-wrong": {("model", "sft", "mix", "wrong")}}
FROM_STUDY_INIT = {"same-regimes": {("science", "init_from")}, "no-wrong": set()}
CONFIG_SHA = experiment_sha256(load(ROOT / "config.yaml"))


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def registered_runs(tmp_path_factory, repo) -> list[tuple[Path, Path]]:
    """Seeds 3 and 4, made at the registry's own commit: it differs from the registered one only under
    docs/, and so does the results page being rewritten there."""
    root = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as monkeypatch:
        made_at(monkeypatch, repo["docs_only"], dirty=["docs/results.md"])
        return [run_seed(root / f"seed{s}", s, plots=s == 3) for s in (3, 4)]


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> dict[str, str]:
    """A git repository with three commits: the registered code (`registered`), then a change under docs/
    alone (`docs_only`, the registry's own commit), then a code change (`code_changed`)."""
    path = tmp_path_factory.mktemp("repo")
    git(path, "init", "-q")
    git(path, "config", "user.email", "t@example.org")
    git(path, "config", "user.name", "t")
    (path / "docs").mkdir()
    (path / "stage.py").write_text("print(1)\n")
    (path / "docs" / "registry.yaml").write_text("reports: []\n")
    commits = {"path": str(path)}
    for name, (file, text) in {"registered": ("stage.py", "print(1)\n"),
                               "docs_only": ("docs/registry.yaml", "next: []\n"),
                               "code_changed": ("stage.py", "print(2)\n")}.items():
        (path / file).write_text(text)
        git(path, "add", "-A")
        git(path, "commit", "-q", "--allow-empty", "-m", name)
        commits[name] = git(path, "rev-parse", "HEAD")
    return commits


def made_at(monkeypatch, commit: str | None, dirty: list[str] | None = (), experiment: str = CONFIG_SHA) -> None:
    """The provenance every following job records: this commit and experiment (as the workflow sets it)."""
    record = {"commit": commit, "dirty": None if dirty is None else list(dirty)}
    monkeypatch.setattr(ewa.io, "code_version", lambda: record)
    monkeypatch.setenv(ewa.io.EXPERIMENT_ENV, experiment)


def run_seed(root: Path, seed: int, design: dict = DESIGN, plots: bool = False) -> tuple[Path, Path]:
    """`ewa frontier` (with its plots for the seed a report shows them for), `ewa claims` and `ewa approaches`
    of one seed's grid under root; (claims, approaches)."""
    paths, problems = write_design(root, design)
    evals = alpha_specs(paths)
    frontier, claims, approaches = (root / step / "mini" / "reasoning" for step in ("frontier", "claims", "approaches"))
    assert main(["frontier", "--evals", *evals, "--problems", str(problems), "--k", "1", "--budget", "10",
                 "--bootstrap", "50", "--formats", *(["png"] if plots else []), "--out-dir", str(frontier)]) == 0
    assert main(["claims", "--evals", *evals, "--ensembles", str(frontier / "ensembles.csv"), "--bootstrap", "50",
                 "--seed", str(seed), "--out-dir", str(claims)]) == 0
    assert main(["approaches", "--evals", *evals, "--samples", *alpha_specs(write_approach_samples(paths)),
                 "--out-dir", str(approaches)]) == 0
    return claims, approaches


def science(runs: list[tuple[Path, Path]], out: Path, registry: Path | None, repo: str | None = None) -> str:
    return write_science([c for c, _ in runs], [a for _, a in runs], runs[0][0].parent.parent.parent / "frontier"
                         / "mini" / "reasoning" / "frontier.png", out, "mini", "reasoning", [0], 0, registry=registry,
                         repo=repo)


def registry_file(path: Path, next_seeds=(3, 4), commit: str = "") -> Path:
    """A registry with nothing reported and `next_seeds` registered at `commit` with config.yaml's hash."""
    write_registry(path, {"reports": [], "withdrawn": [], "next": [
        {"experiment": "config.yaml", "seeds": list(next_seeds), "commit": commit, "config_sha256": CONFIG_SHA}]})
    return path


def test_provenance_names_the_checkouts_commit_and_the_experiment(monkeypatch):
    ewa.io.code_version.cache_clear()
    monkeypatch.setenv(ewa.io.EXPERIMENT_ENV, CONFIG_SHA)
    record = ewa.io.provenance({"k": 1})
    assert re.fullmatch(r"[0-9a-f]{40}", record["code"]["commit"]) and isinstance(record["code"]["dirty"], list)
    assert record["code"]["commit"] == git(ROOT, "rev-parse", "HEAD")
    assert record["experiment_sha256"] == CONFIG_SHA and record["config"] == {"k": 1}
    # no git, or not a checkout: nothing to name, and no error
    monkeypatch.setattr(ewa.io, "_git", lambda *a: None)
    ewa.io.code_version.cache_clear()
    assert ewa.io.code_version() == {"commit": None, "dirty": None}
    ewa.io.code_version.cache_clear()


def test_the_experiment_hash_is_the_validated_configs():
    config = load(ROOT / "config.yaml")
    assert experiment_sha256(config) == experiment_sha256(json.loads(json.dumps(config)))  # key order, copies
    config["grpo"]["max_steps"] += 1
    assert experiment_sha256(config) != CONFIG_SHA


def test_science_reports_registered_seeds_made_at_the_registered_commit(tmp_path, repo, registered_runs):
    runs = registered_runs
    registry = registry_file(tmp_path / "registry.yaml", commit=repo["registered"])
    text = science(runs, tmp_path / "science", registry, repo["path"])
    assert f"Registered: seeds 3, 4 (config.yaml) in `registry.yaml` at commit `{repo['registered'][:10]}`" in text
    registration = json.loads((tmp_path / "science" / "registration.json").read_text())
    assert registration["seeds"] == [3, 4] and registration["config_sha256"] == CONFIG_SHA
    # publishing moves the registration to the reports, once; the seeds can then never be reported again
    assert record_report(registry, registration, "2026-11-26") is True
    assert record_report(registry, registration) is False
    entries = read_registry(registry)
    assert entries["next"] == [] and entries["reports"][-1]["seeds"] == [3, 4]
    assert entries["reports"][-1]["ran_at"] == repo["registered"]
    with pytest.raises(RegistryError, match=r"seed 3 was reported before \(2026-11-26"):
        science(runs, tmp_path / "again", registry, repo["path"])
    assert not (tmp_path / "again").exists()


@pytest.mark.parametrize("case", ["code changed", "uncommitted change", "another config", "no commit"])
def test_science_refuses_a_seed_whose_provenance_is_not_the_registered_one(tmp_path, monkeypatch, repo, case,
                                                                          registered_runs):
    commit, dirty, experiment = {"code changed": (repo["code_changed"], [], CONFIG_SHA),
                                 "uncommitted change": (repo["registered"], ["src/ewa/io.py"], CONFIG_SHA),
                                 "another config": (repo["registered"], [], "0" * 64),
                                 "no commit": (None, None, CONFIG_SHA)}[case]
    made_at(monkeypatch, commit, dirty, experiment)
    runs = [registered_runs[0], run_seed(tmp_path / "seed4", 4)]  # the second seed is made elsewhere
    registry = registry_file(tmp_path / "registry.yaml", commit=repo["registered"])
    with pytest.raises(RegistryError) as refused:
        science(runs, tmp_path / "science", registry, repo["path"])
    message = str(refused.value)
    assert "\n" not in message and "seed 4" in message and "seed4/claims/mini/reasoning/provenance.json" in message
    assert {"code changed": f"made at commit {repo['code_changed'][:10]}, not at the registered "
                            f"{repo['registered'][:10]} (1 file(s) outside docs/ differ, e.g. stage.py)",
            "uncommitted change": "uncommitted changes (src/ewa/io.py)",
            "another config": "experiment config sha256 000000000000, not the registered",
            "no commit": "names no commit"}[case] in message
    assert not (tmp_path / "science").exists()


def test_science_refuses_a_reported_an_unregistered_or_a_dropped_seed(tmp_path, monkeypatch, repo):
    made_at(monkeypatch, repo["registered"])
    runs = {s: run_seed(tmp_path / f"seed{s}", s) for s in (120, 105, 3)}  # refused before anything is drawn
    # this repository's own record: seed 120 was reported on 2026-11-25, seed 105's registration withdrawn
    with pytest.raises(RegistryError, match=r"seed 120 was reported before \(2026-11-25, dfa0ca2; "):
        science([runs[120]], tmp_path / "science", ROOT / "docs" / "registry.yaml", repo["path"])
    with pytest.raises(RegistryError, match=r"seed 105 was in a withdrawn registration \(2026-11-25, d0b2baa; "):
        science([runs[105]], tmp_path / "science", ROOT / "docs" / "registry.yaml", repo["path"])
    with pytest.raises(RegistryError, match=r"seed\(s\) \[3\] are not registered"):
        science([runs[3]], tmp_path / "science", registry_file(tmp_path / "r1.yaml", (5, 6), repo["registered"]),
                repo["path"])
    # a report shows every registered seed: a bad one cannot be left out
    with pytest.raises(RegistryError, match=r"registered seeds \[3, 5\], this report has \[3\]"):
        science([runs[3]], tmp_path / "science", registry_file(tmp_path / "r2.yaml", (3, 5), repo["registered"]),
                repo["path"])
    assert not (tmp_path / "science").exists()


def test_registering_and_checking_before_a_run(tmp_path, repo):
    config = load(ROOT / "config.yaml")
    config["science"]["seeds"] = [130, 131]
    registry = tmp_path / "registry.yaml"
    write_registry(registry, {"reports": [{"seeds": [120, 121]}], "withdrawn": [], "next": []})
    register(registry, {"config.yaml": config}, repo["registered"], "2026-11-26")
    (entry,) = read_registry(registry)["next"]
    assert entry == {"experiment": "config.yaml", "seeds": [130, 131], "commit": repo["registered"],
                     "config_sha256": experiment_sha256(config), "date": "2026-11-26"}
    check_ready(registry, {"config.yaml": config}, repo["docs_only"], ["docs/registry.yaml"], repo["path"])
    for commit, dirty, why in ((repo["code_changed"], [], "not at the registered"),
                               (repo["registered"], ["rules/common.smk"], "uncommitted changes")):
        with pytest.raises(RegistryError, match=why):
            check_ready(registry, {"config.yaml": config}, commit, dirty, repo["path"])
    config["science"]["seeds"] = [121, 132]
    with pytest.raises(RegistryError, match="seed 121 was reported before"):
        register(registry, {"config.yaml": config}, repo["registered"])


def test_scripts_science_publishes_only_checked_tables_and_records_the_report(tmp_path, monkeypatch, repo,
                                                                              registered_runs):
    runs = registered_runs
    made_at(monkeypatch, repo["registered"])
    flat = {a: DESIGN[0.0] for a in DESIGN}  # both regimes alike: every alpha writes what alpha 0 writes
    control = [run_seed(tmp_path / f"seed{s}", s, flat, plots=s == 7) for s in (7, 8)]
    registry = tmp_path / "registry.yaml"
    write_registry(registry, {"reports": [], "withdrawn": [], "next": [
        {"experiment": "config.yaml", "seeds": [3, 4], "commit": repo["registered"], "config_sha256": CONFIG_SHA},
        {"experiment": "configs/control-same-regimes.yaml", "seeds": [7, 8], "commit": repo["registered"],
         "config_sha256": CONFIG_SHA}]})
    study, same = tmp_path / "science/mini/reasoning", tmp_path / "control/science/mini/reasoning"
    science(runs, study, registry, repo["path"])
    science(control, same, registry, repo["path"])
    page = tmp_path / "docs" / "results.md"
    page.parent.mkdir()
    page.write_text("# Results\n\n<!-- science:start -->\n<!-- science:end -->\n\nhand-written\n")
    publish = [sys.executable, str(ROOT / "scripts/science.py"), str(study), "--control", f"same-regimes={same}",
               "--registry", str(registry), "--page", str(page)]
    done = subprocess.run(publish, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert "#### Control: same-regimes" in text and "hand-written" in text
    assert re.search(r"As predicted: none of claims 1, 2, 3\w, [\w, ]*4b is reproduced \(every seed, the study.s rule\)\.", text)
    assert "| study | " in text and "| control same-regimes | " in text
    assert [e["seeds"] for e in read_registry(registry)["reports"]] == [[3, 4], [7, 8]]
    # publishing the same tables again records nothing new
    assert subprocess.run(publish, capture_output=True, text=True).returncode == 0
    assert len(read_registry(registry)["reports"]) == 2
    # a table `ewa science` did not check is not published
    science(runs, tmp_path / "unchecked/mini/reasoning", None)
    done = subprocess.run([sys.executable, str(ROOT / "scripts/science.py"), str(tmp_path / "unchecked/mini/reasoning"),
                           "--registry", str(registry), "--page", str(page)], capture_output=True, text=True)
    assert done.returncode == 1 and "was not checked against a registry" in done.stderr


# ---- the controls --------------------------------------------------------------------------------

def differences(a, b, path=()) -> set[tuple]:
    """The key paths where two configs differ (lists compared whole)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {d for k in set(a) | set(b) for d in differences(a.get(k), b.get(k), (*path, k))}
    return set() if a == b else {path}


def control_name(path: Path) -> str:
    return path.stem.removeprefix("control-")


def test_each_control_is_the_science_config_with_its_one_change():
    assert sorted(map(control_name, CONTROL_CONFIGS)) == sorted(CONTROLS) == sorted(CONTROL_CHANGE)
    study = load(ROOT / "configs" / "science.yaml")
    registry = read_registry(ROOT / "docs" / "registry.yaml")
    def shown_by_others(experiment: str) -> set[int]:  # a config still names the seeds of its own last report
        return {s for name in ("reports", "withdrawn") for e in registry[name] if e["experiment"] != experiment
                for s in e["seeds"]}
    seeds = [study["science"]["seeds"]]
    assert not shown_by_others("configs/science.yaml") & set(study["science"]["seeds"])
    for path in CONTROL_CONFIGS:
        control = load(path)
        name = control_name(path)
        assert differences(study, control) == CONTROL_CHANGE[name] | CONTROL_FREEDOM | FROM_STUDY_INIT[name], path.name
        own = set(control["science"]["seeds"])
        assert len(own) >= 2 and not shown_by_others(f"configs/{path.name}") & own
        assert control["sample"]["settings"] == study["sample"]["settings"] == ["reasoning", "tools", "agentic"]
        seeds.append(control["science"]["seeds"])
    assert len({s for group in seeds for s in group}) == sum(map(len, seeds)), "each run has seeds of its own"
    regimes = load(ROOT / "configs" / "control-same-regimes.yaml")["regimes"]
    assert {r["fraction"] for r in regimes} == {1.0} and len(regimes) == 2


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", CONTROL_CONFIGS, ids=control_name)
def test_each_control_plans_the_full_dag(path, tmp_path):
    """In results/controls/NAME beside the study's results, as make science runs it: the study's calibration
    (ewa calibrate) and, where the control reads it, its init as its ewa_init.json names it (a dry run reads
    nothing else of it; tests/test_shared_init.py builds a real one)."""
    config = load(path)
    seeds, alphas = len(config["science"]["seeds"]), len(config["merge"]["alphas"])
    workdir = tmp_path / "results" / "controls" / control_name(path)
    workdir.mkdir(parents=True)
    assert main(["calibrate", "--config", '{"sandbox": {"backend": "auto"}}', "--out",
                 str(tmp_path / "results" / "calibration.json")]) == 0
    init_seed = config["science"]["init_seed"]
    if config["science"].get("init_from"):
        (workdir / config["science"]["init_from"]).mkdir(parents=True)
        ewa.io.write_json(workdir / config["science"]["init_from"] / "ewa_init.json",
                          ewa.io.provenance({**config["model"], "seed": init_seed}, init="tiny", seed=init_seed))
    done = subprocess.run([str(BIN / "snakemake"), "science_all", "-n", "--profile", str(ROOT / "profiles" / "local"),
                           "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir), "--configfile",
                           str(path)], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    table = done.stdout.split("Job stats:")[1].split("total")[0]
    counts = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}
    settings = len(config["sample"]["settings"])
    per_seed = {"tiers": 1, "train": 2, "merge": alphas, "sample": alphas * settings, "evaluate": alphas * settings,
                "frontier": settings, "claims": settings, "approaches": settings, "training": 1}
    # one init for the control's seeds: the study's, or its own where its change is the init
    own_init = {} if config["science"].get("init_from") else {"shared_init": 1, "shared_init_prepare": 1}
    assert counts == {"preflight": 1, "prepare": 2 * seeds, "science": settings, "science_all": 1, **own_init,
                      "science_training": 1, **{rule: n * seeds for rule, n in per_seed.items()}}
    train = [line for line in done.stdout.splitlines() if line.startswith("Shell command:") and "ewa train --" in line]
    assert all(f"--calibration {config['sandbox']['calibration']} " in c for c in train)
    init = config["science"].get("init_from") or f"results/init/seed{init_seed}/model"
    assert all(f"--init {init} " in c for c in train)
    # the run's evaluations share one verdict cache (ewa.evaluate.cache)
    evaluate = [line for line in done.stdout.splitlines() if line.startswith("Shell command: ewa evaluate")]
    assert evaluate and all('"verdict_cache": "cache/verdicts"' in c for c in evaluate)
    command = next(line for line in done.stdout.splitlines()
                   if line.startswith("Shell command: ewa science") and "--setting reasoning" in line)
    assert f"--registry {ROOT / 'docs' / 'registry.yaml'}" in command
    assert all(f"results/seed{s}/claims/mini/reasoning" in command for s in config["science"]["seeds"])
    assert f"alpha{alpha_tag(config['merge']['alphas'][0])}" in done.stdout


def test_the_inits_step_builds_each_init_a_run_does_not_take_from_another(tmp_path):
    """make science builds the study's init and the own init of a control whose change is the SFT mix side by
    side, and none for a control that starts from the study's (science.init_from)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from science_inits import runs_with_own_init, snakemake_command

    runs = [(".", str(ROOT / "configs" / "science.yaml"))] + [
        (f"results/controls/{control_name(p)}", str(p)) for p in CONTROL_CONFIGS]
    own = {directory for directory, _ in runs_with_own_init(runs)}
    assert own == {"."} | {d for d, c in runs[1:] if not load(c)["science"].get("init_from")}
    assert "results/controls/same-regimes" not in own and "results/controls/no-wrong" in own
    command = snakemake_command(str(tmp_path), str(ROOT / "configs" / "science.yaml"), 1)
    done = subprocess.run(command + ["-n"], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    table = done.stdout.split("Job stats:")[1].split("total")[0]
    counts = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}
    assert counts == {"preflight": 1, "shared_init_prepare": 1, "shared_init": 1, "science_init": 1}
    init_seed = load(ROOT / "configs" / "science.yaml")["science"]["init_seed"]
    assert f"--out results/init/seed{init_seed}/model" in done.stdout and "--threads 1 " in done.stdout


# `make -n` would still remake a makefile: with the stamp named old (-o), a dry run never runs the set-up.
STAMP = ".venv/.ewa-installed"


def test_make_science_checks_registration_then_runs_the_study_and_each_control_in_its_own_directory():
    done = subprocess.run(["make", "-n", "-o", STAMP, "science"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout
    first = lines.index("scripts/register.py --check configs/science.yaml")
    # the calibration every run judges by, then the inits side by side, then the study, then the controls
    calibration = lines.index("snakemake results/calibration.json --profile profiles/local")
    inits = lines.index("scripts/science_inits.py --cores 2 .=configs/science.yaml")
    study = lines.index("snakemake science_all --profile profiles/local --cores 2 --configfile configs/science.yaml")
    assert first < calibration < inits < study < lines.index("snakemake science_all", study + 1)
    names = re.search(r"for c in ([\w\s-]+); do", lines)[1].split()
    assert all(f"results/controls/{n}=configs/control-{n}.yaml" in lines[inits:study] for n in names)
    assert sorted(names) == sorted(map(control_name, CONTROL_CONFIGS))
    assert re.search(r"--directory results/controls/\$c --configfile \S+/configs/control-\$c\.yaml", lines)
    publish = lines[lines.index("scripts/science.py"):]
    assert "--registry docs/registry.yaml" in publish
    assert all(f"--control {n}=results/controls/{n}/results/science/mini/reasoning" in publish for n in names)
    assert all(f"configs/control-{n}.yaml" in lines[first:lines.index("\n", first)] for n in names)


def test_local_runs_do_not_wait_for_a_slurm_controller():
    """Every Snakemake call of make demo and make science (and the inits step that starts more) reads
    profiles/local/no-slurm.conf: the SLURM plugin's `scontrol show config` at import then fails at once
    instead of retrying a controller that is down for MessageTimeout."""
    conf = ROOT / "profiles" / "local" / "no-slurm.conf"
    for target in ("demo", "science"):
        done = subprocess.run(["make", "-n", "-o", STAMP, target], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        starts = [line for line in done.stdout.splitlines()
                  if re.search(r"/(snakemake|python scripts/science_inits\.py) ", line)]
        assert starts and all(f"SLURM_CONF={conf} " in line for line in starts), starts
    if shutil.which("scontrol"):
        done = subprocess.run(["scontrol", "show", "config"], env={**os.environ, "SLURM_CONF": str(conf)},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and "connect failure" in done.stderr, done.stderr


def test_the_registrys_history_is_what_docs_tell():
    """docs/registry.yaml and the pre-registration history in docs/miniature.md name the same reports."""
    registry = read_registry(ROOT / "docs" / "registry.yaml")
    history = (ROOT / "docs" / "miniature.md").read_text().split("## Pre-registration history")[1].split("\n## ")[0]
    for entry in registry["reports"] + registry["withdrawn"]:
        # published null: the commit that added the entry (record_report's); the runs' commit names it then
        commit = entry.get("published") or entry.get("registered_at") or entry.get("ran_at")
        assert git(ROOT, "cat-file", "-t", commit) == "commit"
        assert commit[:7] in history, f"seeds {entry['seeds']}: {commit[:7]} is not in the history"
    reported_twice = [e for e in registry["reports"] if e["seeds"] == [100, 101, 102, 103, 104]]
    assert [e["ran_at"][:7] for e in reported_twice] == ["b242a2c", "245f4cf"]


def test_commits_differing_only_in_docs_match_from_any_directory_of_the_checkout(tmp_path):
    """The workflow compares commits in the registry's directory (docs/): only code outside docs/ counts."""
    from ewa.analysis.registry import code_differs

    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    git(repo, "init", "-q")
    (repo / "stage.py").write_text("x = 1\n")
    (repo / "docs" / "registry.yaml").write_text("next: []\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "code")
    registered = git(repo, "rev-parse", "HEAD")
    (repo / "docs" / "registry.yaml").write_text("next: [1]\n")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "docs")
    docs_only = git(repo, "rev-parse", "HEAD")
    (repo / "stage.py").write_text("x = 2\n")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "code again")
    changed = git(repo, "rev-parse", "HEAD")
    for where in (repo, repo / "docs"):
        assert code_differs(registered, docs_only, where) is None
        assert code_differs(registered, changed, where) == "1 file(s) outside docs/ differ, e.g. stage.py"
