"""Containment (issue J): the sandbox shows model code only what its interpreter needs, never isolates
silently less than asked, sizes its workers to the CPUs granted, and keeps verdicts under CPU
oversubscription. Filesystem cases run on bwrap and on the real Docker engine (skipped without one)."""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
import uuid
import warnings
from pathlib import Path

import pytest

from helpers import private_uid, sandbox_settings

import ewa
from ewa.cli import main as ewa_main
from ewa.errors import UserError
from ewa.problems import Problem, make_test
from ewa.sandbox import Sandbox, default_backend
from ewa.sandbox import backends
from ewa.sandbox.backends import Bwrap, Docker, docker_problem
from ewa.sandbox.pool import cpu_quota, ranks_on_node, worker_sizing
from ewa.verdicts import AC, RE, TLE, WA

pytestmark = pytest.mark.timeout(600)
PROJECT = Path(ewa.__file__).resolve().parents[2]
SECRET = f"ewa-canary-{uuid.uuid4().hex}"
# Host places outside the project where data could live; the old bwrap backend showed the first four.
CANARY_PARENTS = ("/var/lib", "/opt", "/srv", "/usr/local/share", "/root", str(PROJECT))
# Names of the pipeline's data files: none may be visible, wherever they are.
DATA_NAMES = {"problems.jsonl", "samples.jsonl", "results.parquet", "tiers.json", "calibration.json"}
HOST_DIRS = ("/work", "/data", "/root", "/home", "/opt", "/srv", "/var", "/mnt", "/media", "/run", "/boot")


def problem(testtype, tests, func_name=None, time_limit_s=0.5, pid="p"):
    return Problem(id=pid, source="t", difficulty="easy", statement="", testtype=testtype,
                   tests=tuple(make_test(i, o) for i, o in tests), func_name=func_name,
                   time_limit_s=time_limit_s, memory_limit_mb=256)


def bwrap_usable() -> bool:
    return Bwrap(sandbox_settings()).unavailable() is None


@pytest.fixture(scope="module", params=["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
def sb(request):
    if request.param == "bwrap" and not bwrap_usable():
        pytest.skip("bubblewrap is not usable here")
    if request.param == "docker" and (reason := docker_problem(sandbox_settings().docker_image)):
        pytest.skip(f"docker: {reason}")
    with Sandbox(sandbox_settings(), backend=request.param, workers=1, time_factor=1.0) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def canaries():
    """A fresh directory in each of CANARY_PARENTS holding a problems file whose expected output is SECRET."""
    made = []
    for parent in CANARY_PARENTS:
        if not os.access(parent, os.W_OK):
            continue
        d = Path(parent) / f".ewa-canary-{uuid.uuid4().hex[:12]}"
        d.mkdir()
        record = {"id": "canary", "tests": [{"input": "", "output": SECRET}]}
        (d / "problems.jsonl").write_text(json.dumps(record) + "\n")
        made.append(d)
    yield made
    for d in made:
        (d / "problems.jsonl").unlink()
        d.rmdir()


# -- item 1: allow-list containment -------------------------------------------------------------------
def test_canary_outside_the_project_is_unreadable(sb, canaries):
    assert len(canaries) >= 3
    paths = [str(d / "problems.jsonl") for d in canaries]
    probe = (f"import os\nfor p in {paths!r}:\n    print(p, os.path.exists(p), os.path.exists(os.path.dirname(p)))\n"
             f"    try:\n        print(open(p).read())\n    except OSError as e:\n        print(type(e).__name__)\n")
    r = sb.run_code(probe)
    assert r.status == "ok", r.stderr
    assert SECRET not in r.stdout + r.stderr
    assert r.stdout.count("False False") == len(paths) and r.stdout.count("FileNotFoundError") == len(paths)


def test_reward_hack_reading_the_expected_output_is_not_accepted(sb, canaries):
    """The RL failure the judge exists to prevent: find the problems file, print the stored answer."""
    hack = ("import json, os\nfound = []\n"
            "for root, dirs, files in os.walk('/'):\n"
            "    if root in ('/proc', '/sys'):\n        dirs[:] = []\n        continue\n"
            "    for f in files:\n        if f.endswith('.jsonl'):\n            try:\n"
            "                for line in open(os.path.join(root, f)):\n"
            "                    rec = json.loads(line)\n"
            "                    if rec.get('id') == 'canary':\n"
            "                        found.append(rec['tests'][0]['output'])\n"
            "            except Exception:\n                pass\n"
            f"for p in {[str(d / 'problems.jsonl') for d in canaries]!r}:\n"
            "    try:\n        found.append(json.loads(open(p).readline())['tests'][0]['output'])\n"
            "    except OSError:\n        pass\n"
            "print(found[0] if found else 'nothing')\n")
    r = sb.judge(problem("stdin", [("", SECRET)], time_limit_s=20), hack)
    assert r.verdict == WA and SECRET not in r.tests[0].got, r


def test_walking_every_visible_directory_finds_nothing_of_the_project(sb, canaries):
    walk = ("import os\nprint('TOP', *sorted(os.listdir('/')))\n"
            "for root, dirs, files in os.walk('/'):\n"
            "    if root in ('/proc', '/sys'):  # kernel pseudo-filesystems: no host files\n"
            "        dirs[:] = []\n        continue\n"
            "    for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:\n"
            "        print(os.path.join(root, name))\n")
    r = sb.run_code(walk, time_limit_s=60)
    assert r.status == "ok", r.stderr[-2000:]
    top, *files = r.stdout.splitlines()
    assert len(files) > 500 and any(f.endswith("/os.py") for f in files)  # the walk saw the stdlib
    checkout = str(PROJECT)
    leaks = [f for f in files if checkout in f or os.path.basename(f) in DATA_NAMES or ".ewa-canary-" in f]
    assert not leaks, leaks[:20]
    if sb.backend.name == "docker":  # every file is the image's own, or one the engine provides
        engine = {"/.dockerenv", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf"}
        foreign = [f for f in files if f not in engine and f[1:] not in image_files(sb.settings.docker_image)
                   and not f.startswith("/dev/")]
        assert not foreign, foreign[:20]
        return
    allowed_top = {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "tmp", "usr"}
    assert set(top.split()[1:]) <= allowed_top, top
    assert {f.split("/")[1] for f in files} <= allowed_top
    assert not [f for f in files if f.startswith(HOST_DIRS + ("/usr/local/share", "/usr/src"))]


@functools.lru_cache(maxsize=None)
def image_files(image: str) -> frozenset[str]:
    """Every path in the image's filesystem (docker export of a fresh container), without a leading /."""
    cid = subprocess.run(["docker", "create", image], capture_output=True, text=True, check=True).stdout.strip()
    try:
        out = subprocess.run(f"docker export {cid} | tar -t", shell=True, capture_output=True, text=True,
                             check=True).stdout
    finally:
        subprocess.run(["docker", "rm", cid], capture_output=True)
    return frozenset(p.rstrip("/") for p in out.splitlines())


def test_bwrap_shows_the_interpreter_prefix_resolved_through_symlinks(tmp_path):
    if not bwrap_usable():
        pytest.skip("bubblewrap is not usable here")
    # A symlink to the interpreter in a host directory nothing else exposes: its chain is recreated.
    link_dir = Path("/var/lib") / f".ewa-pylink-{uuid.uuid4().hex[:8]}"
    link_dir.mkdir()
    try:
        (link_dir / "python3").symlink_to("/usr/bin/python3")
        (link_dir / "secret.txt").write_text(SECRET)
        with Sandbox(sandbox_settings(python=str(link_dir / "python3")), backend="bwrap", workers=1,
                     time_factor=1.0) as sb:
            r = sb.run_code(f"import os, sys\nprint(sys.version_info[:2], os.listdir({str(link_dir)!r}))\n"
                            f"print(open({str(link_dir / 'secret.txt')!r}).read())\n")
    finally:
        for f in link_dir.iterdir():
            f.unlink()
        link_dir.rmdir()
    assert r.status == RE and "['python3']" in r.stdout and SECRET not in r.stdout, r


@pytest.mark.parametrize("how", ["cwd", "hide"])
def test_project_or_hidden_path_inside_a_shown_directory_is_masked(monkeypatch, how):
    """Should the interpreter's prefix hold the checkout or the working directory (say /usr/src/app),
    they stay hidden; so does a path of `sandbox.hide`."""
    masked = "/usr/share/zoneinfo/America"  # inside a shown directory, needed by nothing here
    if not bwrap_usable() or not os.path.isdir(masked):
        pytest.skip("bubblewrap is not usable here (or no time zones installed)")
    if how == "cwd":
        monkeypatch.chdir(masked)
    settings = sandbox_settings(hide=(masked,) if how == "hide" else ())
    mounts = Bwrap(settings).mounts()
    assert mounts[mounts.index(masked) - 1] == "--tmpfs"
    with Sandbox(settings, backend="bwrap", workers=1, time_factor=1.0) as sb:
        r = sb.run_code(f"import os\nprint(os.listdir({masked!r}), os.path.exists('/usr/share/zoneinfo/UTC'))\n")
    assert r.stdout == "[] True\n", r


def test_docker_image_holds_only_the_interpreter_and_its_libraries():
    image = sandbox_settings().docker_image
    if reason := docker_problem(image):
        pytest.skip(f"docker: {reason}")
    listing = image_files(image)
    assert "usr/bin/python3" in listing
    assert not [p for p in listing if str(PROJECT)[1:] in p or os.path.basename(p) in DATA_NAMES
                or "site-packages/" in p or "dist-packages/" in p]
    rootfs = subprocess.run(["docker", "image", "inspect", "-f", '{{index .Config.Labels "ewa.rootfs"}}', image],
                            capture_output=True, text=True).stdout.strip()
    if rootfs == "debootstrap":  # a minimal Debian from deb.debian.org: nothing of this host
        return
    tops = {p.split("/")[0] for p in listing}
    assert tops <= {".dockerenv", "bin", "dev", "etc", "lib", "lib64", "proc", "sys", "tmp", "usr"}, tops
    etc = {p for p in listing if p.startswith("etc/")}
    assert etc <= {"etc/passwd", "etc/group", "etc/hosts", "etc/hostname", "etc/resolv.conf", "etc/mtab"}, etc


# -- item 5: no silent loss of isolation -----------------------------------------------------------
def test_auto_is_bwrap_else_docker_never_process(monkeypatch):
    if bwrap_usable():
        assert default_backend(sandbox_settings()) == "bwrap"
    monkeypatch.setattr(Bwrap, "unavailable", lambda self: "bwrap fails here: no user namespaces")
    monkeypatch.setattr(Docker, "unavailable", lambda self: None)
    assert default_backend(sandbox_settings()) == "docker"
    monkeypatch.setattr(Docker, "unavailable", lambda self: "no Docker engine is running")
    with pytest.raises(UserError) as e:
        Sandbox(sandbox_settings(), backend="auto", time_factor=1.0)
    message = str(e.value)
    assert "\n" not in message and "sandbox.backend: process" in message
    assert "no user namespaces" in message and "no Docker engine" in message


def test_auto_stops_with_one_line_through_the_cli(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(Bwrap, "unavailable", lambda self: "bubblewrap (bwrap) is not installed")
    monkeypatch.setattr(Docker, "unavailable", lambda self: "the docker client is not installed")
    assert ewa_main(["calibrate", "--out", str(tmp_path / "c.json"), "--repeats", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sandbox.backend: process" in err, err


def test_explicit_unusable_backend_says_why(monkeypatch):
    monkeypatch.setattr(Docker, "unavailable", lambda self: "no Docker engine is running")
    with pytest.raises(UserError, match="sandbox.backend: docker cannot run here: no Docker engine"):
        Sandbox(sandbox_settings(), backend="docker", time_factor=1.0)


def test_explicit_process_warns_once_per_process():
    script = ("import warnings\nwarnings.simplefilter('always')\nfrom ewa.config import section\n"
              "from ewa.sandbox import Sandbox, SandboxSettings\n"
              "s = section('sandbox')\n"
              "settings = SandboxSettings(python=s['python'], docker_image=s['docker_image'])\n"
              "for _ in range(3):\n"
              f"    with Sandbox(settings, backend='process', workers=1, time_factor=1.0, uid={private_uid()}) as sb:\n"
              "        assert sb.run_code('print(1)').stdout == '1\\n'\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(PROJECT / "src")})
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("RuntimeWarning") == 1 and "not isolation" in out.stderr, out.stderr


def fake_python(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("backend", ["bwrap", "process"])
def test_interpreter_is_checked_at_start(tmp_path, backend):
    if backend == "bwrap" and not bwrap_usable():
        pytest.skip("bubblewrap is not usable here")
    cases = {
        str(tmp_path / "missing"): "not found",
        fake_python(tmp_path, "old", """echo '{"version": [3, 8, 10], "prefix": "/usr"}'"""): "is Python 3.8.10",
        fake_python(tmp_path, "notpython", "echo 'Unknown option: -E' >&2; exit 2"): "does not run as Python",
        "python3": "absolute path",
    }
    for python, why in cases.items():
        with pytest.raises(UserError) as e, warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            Sandbox(sandbox_settings(), backend=backend, python=python, workers=1, time_factor=1.0)
        message = str(e.value)
        assert message.startswith(f"sandbox.python: {python}") and why in message and "\n" not in message, message


def test_docker_interpreter_is_checked(monkeypatch):
    image = sandbox_settings().docker_image
    if reason := docker_problem(image):
        pytest.skip(f"docker: {reason}")
    version = backends.docker_interpreter(image, "/usr/bin/python3")
    assert tuple(map(int, version.split("."))) >= backends.MIN_PYTHON
    with pytest.raises(UserError, match=r"sandbox.python of sandbox.docker_image .* does not run"):
        backends.docker_interpreter(image, "/usr/bin/python2.7")


# -- item 7: workers sized to the CPUs granted ------------------------------------------------------
def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_cpu_quota_v2_and_v1(tmp_path):
    v2 = tmp_path / "v2"
    write(v2 / "proc-cgroup", "0::/job/step\n")
    write(v2 / "fs" / "cpu.max", "max 100000\n")
    write(v2 / "fs" / "job" / "cpu.max", "300000 100000\n")
    write(v2 / "fs" / "job" / "step" / "cpu.max", "max 100000\n")
    assert cpu_quota(str(v2 / "fs"), str(v2 / "proc-cgroup")) == 3.0  # the tightest ancestor counts
    write(v2 / "fs" / "job" / "step" / "cpu.max", "150000 100000\n")
    assert cpu_quota(str(v2 / "fs"), str(v2 / "proc-cgroup")) == 1.5
    v1 = tmp_path / "v1"
    write(v1 / "proc-cgroup", "4:memory:/slurm/job1\n3:cpu,cpuacct:/slurm/job1\n0::/\n")
    write(v1 / "fs" / "cpu,cpuacct" / "slurm" / "job1" / "cpu.cfs_quota_us", "400000\n")
    write(v1 / "fs" / "cpu,cpuacct" / "slurm" / "job1" / "cpu.cfs_period_us", "100000\n")
    write(v1 / "fs" / "cpu,cpuacct" / "cpu.cfs_quota_us", "-1\n")
    write(v1 / "fs" / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n")
    assert cpu_quota(str(v1 / "fs"), str(v1 / "proc-cgroup")) == 4.0
    # A container that sees only its own cgroup at the mount's root (no cgroup namespace).
    write(v1 / "proc-cgroup", "3:cpu,cpuacct:/docker/abc\n")
    write(v1 / "fs" / "cpu,cpuacct" / "cpu.cfs_quota_us", "200000\n")
    assert cpu_quota(str(v1 / "fs"), str(v1 / "proc-cgroup")) == 2.0
    assert cpu_quota(str(tmp_path / "none"), str(tmp_path / "none" / "cgroup")) is None


def test_workers_follow_affinity_quota_and_ranks(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    write(tmp_path / "proc-cgroup", "0::/\n")
    write(tmp_path / "fs" / "cpu.max", "max 100000\n")
    sizing = lambda env: worker_sizing(env, str(tmp_path / "fs"), str(tmp_path / "proc-cgroup"))  # noqa: E731
    assert sizing({})["workers"] == 16
    write(tmp_path / "fs" / "cpu.max", "650000 100000\n")  # SLURM --cpus-per-task 6.5: counts down
    assert sizing({}) == {"workers": 6, "affinity_cpus": 16, "cgroup_quota_cpus": 6.5, "ranks_on_node": 1}
    assert sizing({"LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "16"})["workers"] == 1  # 6 CPUs, 4 ranks here
    assert sizing({"WORLD_SIZE": "2"})["workers"] == 3
    write(tmp_path / "fs" / "cpu.max", "50000 100000\n")  # half a CPU: still one worker
    assert sizing({"LOCAL_WORLD_SIZE": "8"})["workers"] == 1
    assert ranks_on_node({"LOCAL_WORLD_SIZE": "x"}) == 1 and ranks_on_node({}) == 1
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert worker_sizing(cgroup_root=str(tmp_path / "none"))["workers"] == 2


def test_sandbox_defaults_to_the_granted_workers(monkeypatch):
    if not bwrap_usable():
        pytest.skip("bubblewrap is not usable here")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "64")
    with Sandbox(sandbox_settings(), backend="bwrap", time_factor=1.0) as sb:
        assert sb.workers == 1 and sb.info()["worker_sizing"]["ranks_on_node"] == 64


# -- item 7: the wall-clock backstop in its own column; verdicts under oversubscription --------------
def test_backstop_kills_are_recorded_apart(tmp_path):
    if not bwrap_usable():
        pytest.skip("bubblewrap is not usable here")
    from ewa.evaluate.run import row, to_table
    prob = problem("stdin", [("", "x\n"), ("1", "x\n")], time_limit_s=0.2)
    with Sandbox(sandbox_settings(), backend="bwrap", workers=1, time_factor=1.0) as sb:
        slept = sb.judge(prob, "import time\ntime.sleep(30)\n")
        fine = sb.judge(prob, "print('x')\n")
    assert slept.verdict == TLE and slept.backstop_kills == 2 and all(t.wall_backstop for t in slept.tests)
    assert fine.verdict == AC and fine.backstop_kills == 0 and not any(t.wall_backstop for t in fine.tests)
    sample = {"problem_id": "p", "sample_id": 0, "carried": {}}
    table = to_table([row(sample, 0, slept), row(sample, 1, fine)]).to_pylist()
    assert [r["backstop_kills"] for r in table] == [2, 0]
    assert [t["wall_backstop"] for t in table[0]["tests"]] == [True, True]
    assert {"verdict", "cpu_time_s", "wall_time_s", "tier", "error"} <= set(table[0]["tests"][0])


LIMIT_S = 0.25
BURN = "import time\nwhile time.process_time() < {cpu}:\n    pass\n"  # CPU seconds, whatever the load
# Programs using about 60% of their CPU limit, in each shape a verdict can take, plus two that exceed it.
NEAR_LIMIT = {
    "stdin_ac": ("stdin", BURN + "print(int(input()) * 2)\n", AC),
    "stdin_wa": ("stdin", BURN + "print(int(input()) * 3)\n", WA),
    "stdin_re": ("stdin", BURN + "raise ValueError('late')\n", RE),
    # Two threads burning until the process (both together) has used 60%.
    "stdin_threads": ("stdin", "import threading\ndef burn():\n" + "".join("    " + line + "\n" for line in
                      BURN.splitlines()) + "ts = [threading.Thread(target=burn) for _ in range(2)]\n"
                      "[t.start() for t in ts]\n[t.join() for t in ts]\nprint(int(input()) * 2)\n", AC),
    "stdin_memory": ("stdin", "x = bytearray(64 << 20)\nx[::4096] = b'1' * len(x[::4096])\n" + BURN
                     + "print(int(input()) * 2)\n", AC),
    "functional_ac": ("functional", BURN + "def double(x):\n    return 2 * x\n", AC),
    "functional_wa": ("functional", "def double(x):\n" + "".join("    " + line + "\n" for line in
                      BURN.splitlines()) + "    return 3 * x\n", WA),
    "over_limit": ("stdin", "while True:\n    pass\n", TLE),
    "sleeps": ("stdin", "import time\ntime.sleep(60)\n", TLE),
}


@pytest.mark.serial  # "quiet" must be quiet: not beside the suite's other workers
def test_verdicts_identical_quiet_and_under_4x_oversubscription():
    if not bwrap_usable():
        pytest.skip("bubblewrap is not usable here")
    stdin = problem("stdin", [("21\n", "42\n"), ("5\n", "10\n")], time_limit_s=LIMIT_S)
    functional = problem("functional", [("21", "42"), ("5", "10")], func_name="double", time_limit_s=LIMIT_S)
    items = []
    for name, (kind, code, _) in NEAR_LIMIT.items():
        items.append((stdin if kind == "stdin" else functional, code.replace("{cpu}", str(0.6 * LIMIT_S)), None))
    with Sandbox(sandbox_settings(), backend="bwrap", time_factor=1.0) as sb:  # workers: the CPUs granted
        cores = sb.workers
        quiet = sb.judge_many(items)
        # 4x oversubscription: four busy loops per core, each its own session (so its own scheduling
        # autogroup, like an independent job), each ending by itself within a minute.
        hog = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end:\n    pass\n"
        hogs = [subprocess.Popen([sys.executable, "-c", hog], start_new_session=True) for _ in range(4 * cores)]
        try:
            time.sleep(0.5)
            loaded = sb.judge_many(items)
        finally:
            for h in hogs:
                h.kill()
                h.wait()
    names = list(NEAR_LIMIT)
    assert [r.verdict for r in quiet] == [v for _, _, v in NEAR_LIMIT.values()], list(zip(names, quiet))
    assert [r.verdict for r in loaded] == [r.verdict for r in quiet], list(zip(names, loaded))
    near = [i for i, n in enumerate(names) if n not in ("over_limit", "sleeps")]
    for results in (quiet, loaded):
        assert all(results[i].backstop_kills == 0 for i in near), [(names[i], results[i]) for i in near]
        assert all(max(t.cpu_time_s for t in results[i].tests) <= LIMIT_S for i in near)
        assert results[names.index("sleeps")].backstop_kills >= 1
    # The load was real: programs near the limit took several times longer by the wall clock.
    wall = lambda rs: sorted(t.wall_time_s for i in near for t in rs[i].tests)[len(near)]  # noqa: E731
    assert wall(loaded) > 2 * wall(quiet), (wall(quiet), wall(loaded))
