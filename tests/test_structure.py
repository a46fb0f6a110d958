"""The package as a user meets it: a wheel that carries its own schema, one config path into every
stage, the sandbox section reaching every step that runs model code; and as a maintainer meets it: the
config validated in the CLI alone, and no import cycle between the package's units."""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from helpers import BIN, ROOT, docker_engine, workflow_env

JUDGING_RULES = ("calibrate", "init", "train", "sample", "evaluate")  # every rule that runs code in the sandbox
PROBE_IMAGE = "ewa-probe-missing:1"


def test_wheel_installs_with_its_schema_and_validates_a_config(tmp_path):
    """A wheel of the package, installed into a fresh venv away from the checkout, validates configs:
    the schema and the accelerate configs travel inside it."""
    source = tmp_path / "source"  # a copy, so the build leaves nothing in the checkout
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(ROOT / "pyproject.toml", source)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path / "dist"), str(source)], check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("ewa-*.whl"))
    fresh = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True)
    site = Path(subprocess.run([fresh / "bin/python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site),
                    str(wheel)], check=True, capture_output=True)
    # Third-party dependencies come from this venv; its editable link to src/ is not followed (a plain
    # path in a .pth file does not process the .pth files inside it).
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    shutil.copy(ROOT / "configs/paper-7b.yaml", tmp_path / "experiment.yaml")
    probe = """
import ewa, ewa.config, ewa.analysis.cli, ewa.evaluate.cli, ewa.init.cli, ewa.data.mini
from ewa.train.launch import accelerate_config_path
assert "/src/ewa" not in ewa.__file__, ewa.__file__
config = ewa.config.load("experiment.yaml")
print(config["sample"]["n"], accelerate_config_path("zero3").is_file())
try:
    ewa.config.validate({"merge": {"alpahs": [1]}})
except ewa.config.ConfigError as e:
    print(e)
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only the fresh venv's own paths
    out = subprocess.run([fresh / "bin/python", "-c", probe], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "250 True"
    assert lines[1].startswith("config: unknown key 'merge.alpahs'")


def planned_commands(config_file: Path) -> dict[str, list[str]]:
    """Shell command of every job a dry run of `config_file` plans, by rule."""
    r = subprocess.run([str(BIN / "snakemake"), "-n", "-p", "--cores", "1", "--configfile", str(config_file),
                        "--directory", str(config_file.parent)], cwd=ROOT, capture_output=True,
                       text=True, env=workflow_env())
    assert r.returncode == 0, r.stderr[-3000:]
    commands, rule = {}, None
    for line in (r.stdout + r.stderr).splitlines():
        if m := re.match(r"(?:local)?rule (\w+):", line.strip()):
            rule = m[1]
        elif re.match(r"Shell command: (\S+=\S+ )*ewa ", line) and rule:  # GPU jobs may set an env var first
            commands.setdefault(rule, []).append(line)
    return commands


def config_of(command: str) -> dict:
    return json.loads(re.search(r"--config '(\{.*?\})'", command)[1])


def test_the_sandbox_section_reaches_every_rule_that_runs_model_code(tmp_path):
    config = yaml.safe_load((ROOT / "configs/reduced.yaml").read_text())
    config["sandbox"] = {"docker_image": PROBE_IMAGE, "python": "/opt/py/bin/python3", "calibrate": True}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    commands = planned_commands(tmp_path / "config.yaml")
    assert set(JUDGING_RULES) <= set(commands)
    for rule in JUDGING_RULES:
        for command in commands[rule]:
            sandbox = config_of(command)["sandbox"]
            assert sandbox["docker_image"] == PROBE_IMAGE and sandbox["python"] == "/opt/py/bin/python3", (rule, command)
    # Every job that reads the config, whatever its stage, takes it by the one path.
    reads_no_config = {"approaches"}
    assert all("--config '" in c for rule, cs in commands.items() if rule not in reads_no_config for c in cs)


def test_a_prepare_that_verifies_solutions_gets_the_sandbox_and_the_calibration(tmp_path):
    """CodeContests train_data runs its bundled solutions in the configured sandbox, time limits
    calibrated like the reward's; a benchmark (not verified) and the miniature's mini read neither."""
    config = yaml.safe_load((ROOT / "configs/reduced.yaml").read_text())
    for name in ("train.jsonl", "test.jsonl"):
        (tmp_path / name).touch()
    config["train_data"] = {"format": "codecontests", "input": str(tmp_path / "train.jsonl")}
    config["benchmarks"]["cc"] = {"format": "codecontests", "input": str(tmp_path / "test.jsonl")}
    config["sandbox"] = {"docker_image": PROBE_IMAGE, "calibrate": True}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    prepare = {re.search(r"--dataset (\S+)", c)[1]: c for c in planned_commands(tmp_path / "config.yaml")["prepare"]}
    assert set(prepare) == {"train_data", "mini", "cc"}
    train = prepare["train_data"]
    assert config_of(train)["sandbox"]["docker_image"] == PROBE_IMAGE
    assert config_of(train)["train_data"]["verify_solutions"] is True
    assert "--calibration results/calibration.json" in train and re.search(r"--workers \d+ ", train)
    for name in ("mini", "cc"):
        assert "sandbox" not in config_of(prepare[name]) and "--calibration" not in prepare[name]
        assert "verify_solutions" not in json.dumps(config_of(prepare[name]))


@pytest.mark.docker
@pytest.mark.skipif(not docker_engine(), reason="no Docker engine (make docker-sandbox starts one)")
def test_the_configured_docker_image_is_the_one_each_stage_runs(tmp_path, capsys):
    """With backend docker and an image that does not exist, calibration and evaluation stop with one
    line naming that image: they looked for the configured image, not the default one."""
    from ewa.cli import main

    config = json.dumps({"sandbox": {"backend": "docker", "docker_image": PROBE_IMAGE}})
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"id": "p", "source": "t", "difficulty": "", "statement": "echo", "starter_code": "",
                                    "testtype": "stdin", "func_name": None, "time_limit_s": 1, "memory_limit_mb": 256,
                                    "tests": [{"input": "1\n", "output": "1\n", "size": 2, "public": True}],
                                    "meta": {}}) + "\n")
    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"problem_id": "p", "sample_id": 0, "code": "print(input())"}) + "\n")
    runs = {"calibrate": ["calibrate", "--config", config, "--out", str(tmp_path / "c.json")],
            "evaluate": ["evaluate", "--config", config, "--problems", str(problems), "--samples", str(samples),
                         "--time-factor", "1", "--out", str(tmp_path / "e.parquet")]}
    for name, argv in runs.items():
        assert main(argv) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and PROBE_IMAGE in err[0], (name, err)
        assert not list(tmp_path.glob("[ce].*")), name  # nothing half-written


# --- the package's shape ---------------------------------------------------------------------------

PACKAGE = ROOT / "src" / "ewa"
VALIDATOR_CALLS = {"validate", "section", "from_arg"}  # ewa.config's entry points that validate
VALIDATOR_MODULES = {"ewa.config", "jsonschema"}


def package_modules() -> dict[str, tuple[Path, bool]]:
    """Every module of ewa by dotted name (a package under its own name): (file, is_package)."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if package else parts)] = (path, package)
    return modules


def imported_modules(name: str, path: Path, package: bool, modules: dict) -> set[str]:
    """The ewa modules `name` imports anywhere in its file (function-level imports included): `from a.b
    import c` counts as a.b.c where that is a module, else a.b; a name outside the package is dropped."""
    def known(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    here = name if package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(known(a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(here.split(".")[:len(here.split(".")) - node.level + 1] + ([base] if base else []))
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else known(base) for a in node.names)
    return found - {None, name}


def unit(module: str) -> str:
    """The node a module belongs to: ewa.config, or a whole subpackage such as ewa.sample."""
    return ".".join(module.split(".")[:2])


def test_no_import_cycle_between_the_packages_units():
    """Stages meet through files, shared code sits at the top: among ewa's top-level modules and
    subpackages (each one node), no chain of imports, deferred ones included, leads back to its start."""
    modules = package_modules()
    graph: dict[str, set[str]] = {}
    for name, (path, package) in modules.items():
        for target in imported_modules(name, path, package, modules):
            if unit(name) != unit(target) and "ewa" not in (unit(name), unit(target)):
                graph.setdefault(unit(name), set()).add(unit(target))
    assert {"ewa.config", "ewa.data", "ewa.sample", "ewa.sandbox", "ewa.tiers"} <= set(graph)  # the parse works

    def cycle_from(start: str, node: str, path: list[str]) -> list[str] | None:
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                return path + [nxt]
            if nxt not in path and (found := cycle_from(start, nxt, path + [nxt])):
                return found
        return None

    cycles = [c for start in sorted(graph) if (c := cycle_from(start, start, [start]))]
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_config_is_validated_in_the_cli_alone():
    """`ewa COMMAND --config` validates the slice once (ewa.cli -> ewa.config.from_arg); below the CLI
    layer (ewa.cli and the command modules it dispatches to) the stages take the validated sections as
    they are: no other module imports ewa.config or jsonschema, or calls validate, section or from_arg."""
    from ewa.cli import COMMANDS

    cli_layer = {"ewa.config", "ewa.cli", *(module for module, _ in COMMANDS.values())}
    # gpu-check is a command that composes the stages with settings of its own (two GRPO steps, one process):
    # it validates the sections it makes, as the CLI does for a job's slice
    composers = ("ewa.gpucheck.",)
    offenders = []
    for name, (path, _) in package_modules().items():
        if name in cli_layer or name.startswith(composers):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                bad = [a.name for a in node.names if a.name in VALIDATOR_MODULES or a.name.startswith("jsonschema.")]
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                named = {f"{module}.{a.name}" for a in node.names}
                bad = [module] if module in VALIDATOR_MODULES or module.startswith("jsonschema.") \
                    or named & VALIDATOR_MODULES else []
            elif isinstance(node, ast.Call):
                func = node.func
                called = getattr(func, "id", None) or getattr(func, "attr", None)
                bad = [f"{called}()"] if called in VALIDATOR_CALLS else []
            else:
                continue
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno}: {b}" for b in bad]
    assert not offenders, "the config is validated below the CLI:\n" + "\n".join(offenders)

