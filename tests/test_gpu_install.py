"""The GPU set (envs/gpu-requirements.txt, installed by `make setup-gpu`) resolves for a Linux x86_64 /
CPython 3.11 GPU node, checked here on a CPU machine by pip's own resolver:
`pip install --dry-run --report` with the node's --platform tags and --only-binary=:all:.

Source-only packages are the one allowance (SOURCE_ONLY): no Linux wheel exists at their pins, so pip
builds them on the node. Here they are built the same way, into a local wheelhouse that the binary
resolve also searches, so they and their dependencies are resolved together with everything else.
deepspeed builds with DS_BUILD_OPS=0, as scripts/setup-gpu.sh installs it: Python files only, nothing
compiled, no torch needed (its setup.py only records torch's version when torch is importable). A second
test keeps the allowance honest: each of them still has no wheel for the node.

pip reads no pip configuration here (PIP_CONFIG_FILE=/dev/null, no index/find-links variables): the
package index alone, as on a cluster; a development machine's local wheels (a +cpu torch) must not
answer for it. Wheels' metadata is read with HTTP range requests (fast-deps), so the ~4 GB of CUDA
wheels are not downloaded. About 45 s on an idle machine, nearly all of it network round trips; skipped,
with the reason, only when the package index cannot be reached.
"""
from __future__ import annotations

import json
import os
import platform
import re
import ssl
import subprocess
import sys
import tempfile
import tomllib
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
REQS = ROOT / "envs" / "gpu-requirements.txt"

# The node: CPython 3.11 on Linux x86_64 with glibc 2.34 (RHEL/Rocky 9; newer distributions accept
# every tag listed here too). vLLM's llguidance has no wheel below manylinux_2_31, so 2.31 is the floor.
PYTHON = ["--python-version", "3.11", "--implementation", "cp", "--abi", "cp311"]
GLIBC_MINOR = 34
PLATFORMS = ([f"manylinux_2_{m}_x86_64" for m in range(GLIBC_MINOR, 4, -1)]
             + ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64", "any"])
NODE = PYTHON + [arg for p in PLATFORMS for arg in ("--platform", p)]
# pip evaluates environment markers (`; python_version > "3.11"`) for the interpreter that runs it, not
# for --python-version/--platform: the resolution is the node's only when that interpreter is one too.
NODE_MARKERS = {"python_version": "3.11", "sys_platform": "linux", "platform_machine": "x86_64",
                "implementation_name": "cpython"}

# The allowance: pinned packages that have only an sdist at their pin, and why that is acceptable.
SOURCE_ONLY = {
    "deepspeed": "recent releases are sdists only; with DS_BUILD_OPS=0 the build packs Python sources and its "
                 "CUDA ops compile just in time on the node",
    "connection-pool": "snakemake 9.27 needs >=0.0.3, released as an sdist only; pure Python",
}

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def pins(path: Path = REQS) -> dict[str, Requirement]:
    """The requirements of a requirements file (comments and blank lines skipped), by canonical name."""
    reqs = [Requirement(line.split("#")[0].strip()) for line in path.read_text().splitlines()
            if line.split("#")[0].strip()]
    return {canonicalize_name(r.name): r for r in reqs}


def pip_env() -> dict[str, str]:
    """The environment with no pip configuration but the CA bundle: the package index alone."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k == "PIP_CERT"}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def pip(*args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=timeout,
                          env={**pip_env(), **env})


def dry_run(*args: str, report: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    """`pip install --dry-run` for the node (binary only), into nothing: --target keeps this venv out."""
    target = Path(tempfile.gettempdir()) / "ewa-gpu-dry-run"  # a dry run writes nothing there
    cmd = ["install", "--dry-run", "--ignore-installed", "--target", str(target),
           "--only-binary=:all:", *NODE, *(["--report", str(report)] if report else []), *args]
    r = pip(*cmd, "--use-feature=fast-deps", **env)
    if "fast-deps" in r.stderr and "invalid choice" in r.stderr:  # a pip that no longer has the feature
        r = pip(*cmd, **env)
    return r


@pytest.fixture(scope="module")
def index():
    """Skip quickly, with the reason, when the package index (pip's default) cannot be reached."""
    from pip._internal.models.index import PyPI

    here = {"python_version": "%d.%d" % sys.version_info[:2],
            "sys_platform": sys.platform, "platform_machine": platform.machine(),
            "implementation_name": sys.implementation.name}
    if here != NODE_MARKERS:  # never on the project's machines: setup.sh insists on CPython 3.11
        pytest.skip(f"pip evaluates markers for this interpreter ({here}), not the node's ({NODE_MARKERS})")

    context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
    try:
        urllib.request.urlopen(PyPI.simple_url.rstrip("/") + "/pip/", timeout=10, context=context).close()
    except urllib.error.HTTPError:  # it answered
        pass
    except OSError as exc:  # no route, no DNS, refused, timed out, TLS failure
        pytest.skip(f"the package index is unreachable ({exc}); the GPU set resolves only against it")


@pytest.fixture(scope="module")
def resolved(index, tmp_path_factory) -> dict:
    """pip's report of the GPU set for the node: source-only pins built first, then one binary resolve."""
    tmp = tmp_path_factory.mktemp("gpu-install")
    wheelhouse = tmp / "wheelhouse"
    source_pins = [str(pins()[name]) for name in SOURCE_ONLY]
    # --no-cache-dir: a deepspeed wheel built without torch must not land in pip's cache for a real install.
    r = pip("wheel", "--no-deps", "--no-binary", ",".join(SOURCE_ONLY), "--no-cache-dir", "--quiet",
            "--wheel-dir", str(wheelhouse), *source_pins, DS_BUILD_OPS="0")
    assert r.returncode == 0, f"building {source_pins} failed:\n{r.stderr[-3000:]}"
    for wheel in wheelhouse.glob("*.whl"):  # pure, so building them here stands for building them on the node
        assert wheel.name.endswith("-py3-none-any.whl"), wheel.name

    report = tmp / "report.json"
    r = dry_run("--find-links", str(wheelhouse), "-r", str(REQS), report=report)
    assert r.returncode == 0, f"the GPU set does not resolve for the node:\n{(r.stdout + r.stderr)[-6000:]}"
    data = json.loads(report.read_text())
    env = data["environment"]
    assert {k: env[k] for k in NODE_MARKERS} == NODE_MARKERS, env
    return {canonicalize_name(item["metadata"]["name"]): {**item, "environment": env} for item in data["install"]}


def requires(item: dict, extras: set[str]) -> list[Requirement]:
    """The requirements of a report entry that apply on the node (pip's marker environment) with these extras."""
    out = []
    for spec in item["metadata"].get("requires_dist") or []:
        req = Requirement(spec)
        if req.marker is None or any(req.marker.evaluate({**item["environment"], "extra": e}) for e in extras | {""}):
            out.append(req)
    return out


def test_gpu_set_resolves_for_a_linux_gpu_node(resolved):
    version = {name: Version(item["metadata"]["version"]) for name, item in resolved.items()}

    # Every pin is honoured, the headline ones spelled out.
    for name, req in pins().items():
        assert name in resolved, f"{name} is pinned but not in the resolution"
        assert req.specifier.contains(version[name], prereleases=True), f"{name} {version[name]} vs {req}"
    assert str(version["vllm"]) == "0.31.0"
    assert str(version["trl"]) == "1.16.0"
    assert str(version["transformers"]) == "5.17.0"
    assert str(version["accelerate"]) == "1.15.0"

    # torch is the CUDA build: no local (+cpu) label, and it pulls the CUDA libraries.
    torch = resolved["torch"]
    assert str(version["torch"]) == "2.13.0" and not version["torch"].local, version["torch"]
    torch_reqs = {canonicalize_name(r.name): r for r in requires(torch, set())}
    assert "cuda-toolkit" in torch_reqs and str(torch_reqs["cuda-toolkit"].specifier) == "==13.0.3", torch_reqs
    for lib in ("nvidia-nccl-cu13", "nvidia-cudnn-cu13", "cuda-toolkit", "triton"):
        assert lib in resolved, f"CUDA torch needs {lib}"
    # deepspeed built beside a CUDA torch also requires nvidia-ml-py (built here without torch, it does not).
    assert "nvidia-ml-py" in resolved

    # vLLM's own torch pin is the one chosen, and TRL accepts this vLLM and this deepspeed.
    vllm_torch = next(r for r in requires(resolved["vllm"], set()) if canonicalize_name(r.name) == "torch")
    assert vllm_torch.specifier.contains(version["torch"]), vllm_torch
    for extra, dep in (("vllm", "vllm"), ("deepspeed", "deepspeed")):
        spec = next(r for r in requires(resolved["trl"], {extra}) if canonicalize_name(r.name) == dep)
        assert spec.specifier.contains(version[dep]), f"trl[{extra}] wants {spec}, the set has {version[dep]}"

    # No silent drift: everything resolved is pinned here or required, transitively, by something pinned.
    reached, todo = set(), [(name, set(req.extras)) for name, req in pins().items()]
    while todo:
        name, extras = todo.pop()
        if (name, frozenset(extras)) in reached:
            continue
        reached.add((name, frozenset(extras)))
        todo += [(canonicalize_name(r.name), set(r.extras)) for r in requires(resolved[name], extras)]
    stray = set(resolved) - {name for name, _ in reached}
    assert not stray, f"resolved but neither pinned nor required: {sorted(stray)}"

    # Wheels for the node only; the source-only pins, and only they, come from the local builds.
    local = set()
    for name, item in resolved.items():
        url = item["download_info"]["url"]
        assert url.endswith(".whl"), url
        tags = [int(m) for m in re.findall(r"manylinux_2_(\d+)_", url.rsplit("/", 1)[-1])]
        assert not tags or min(tags) <= GLIBC_MINOR, url
        if url.startswith("file:"):
            local.add(name)
    assert local == set(SOURCE_ONLY), local


def test_source_only_allowance_is_still_needed(index, tmp_path):
    """Each allowed package still has no wheel for the node at its pin (else drop it from SOURCE_ONLY)."""
    for name in SOURCE_ONLY:
        r = pip("download", "--no-deps", "--only-binary=:all:", *NODE, "--dest", str(tmp_path), "--quiet",
                str(pins()[name]), timeout=120)
        assert r.returncode != 0 and "No matching distribution" in r.stderr, \
            f"{name} now has a wheel for the node: {SOURCE_ONLY[name]} no longer holds"


def test_cpu_set_transformers_pin_cannot_join_vllm(index):
    """Why the GPU set pins transformers 5.17.0: vLLM 0.31.0 with pyproject's transformers is impossible."""
    cpu = {canonicalize_name(Requirement(d).name): d
           for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    r = dry_run(str(pins()["vllm"]), cpu["transformers"])
    out = r.stdout + r.stderr  # pip explains the conflict on stdout
    assert r.returncode != 0 and "ResolutionImpossible" in out, out[-3000:]
    assert re.search(r"vllm 0\.31\.0 depends on transformers<5\.18", out), out[-3000:]


def fake_cpu_torch(directory: Path, version: str) -> Path:
    """A wheel named like the PyTorch CPU build (`+cpu`), as a CPU index or find-links dir offers it."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"torch-{version}+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    info = f"torch-{version}+cpu.dist-info"
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}+cpu\n")
        whl.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
                                      "Tag: cp311-cp311-manylinux_2_28_x86_64\n")
        whl.writestr(f"{info}/RECORD", "")
    return path


def test_torch_pin_refuses_a_cpu_build(index, tmp_path):
    """`torch==X` takes a visible `X+cpu` wheel over the index's CUDA build; the file's `===X` cannot."""
    torch = pins()["torch"]
    version = str(torch.specifier).lstrip("=")
    fake_cpu_torch(tmp_path / "cpu", version)

    def chosen(spec: str) -> str:
        report = tmp_path / "torch.json"
        r = dry_run("--no-deps", "--find-links", str(tmp_path / "cpu"), spec, report=report)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(report.read_text())["install"][0]["metadata"]["version"]

    assert chosen(f"torch=={version}") == f"{version}+cpu"
    assert chosen(str(torch)) == version


def test_gpu_set_covers_ewa_runtime_deps():
    """ewa goes on top with --no-deps, so every runtime dependency it declares must be in the GPU set."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["dependencies"] + project["optional-dependencies"]["slurm"]
    missing = {canonicalize_name(Requirement(d).name) for d in declared} - set(pins())
    assert not missing, f"declared by pyproject.toml, absent from {REQS.name}: {sorted(missing)}"
