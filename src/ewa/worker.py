"""Run `ewa` jobs in a worker that imported torch and transformers once (EWA_WORKER=1).

A job of the CPU miniature spends most of its start importing torch and transformers, not loading its
tiny model (docs/benchmarks.md#the-worker has the figures). With EWA_WORKER=1 the `ewa` command hands its job to a worker: a process that imported
those modules once and forks a child per job. The child runs the command (`ewa.cli.run_command`) with the
job's argv, working directory, umask, environment and stdin/stdout/stderr (passed as descriptors), so
outputs, logs and exit status are those of a run in its own process. A signal the command receives (Snakemake
stopping a job) reaches the child's process group; a command killed outright takes its child with it.

A worker serves one environment and one state of the installed code: the key it listens under hashes
both, so a job whose environment differs (another thread count) or code that changed since the worker
started gets a worker of its own. It is never used inside a SLURM job (the job must run in its own
cgroup), nor with a CUDA build of torch (a child forked from a process that touched CUDA cannot use it;
on a GPU the start is small beside the work), nor for commands that measure their own process
(`plan`, `gpu-check`, `preflight`). A worker exits after IDLE_S without jobs; a command it did not
take by then (it acknowledges each job it forks) runs its job in its own process.

Snakemake's `benchmark:` files measure the command's process tree: under a worker their wall time is
the job's, their CPU time and memory are the command's only. EWA_WORKER=0 (or unset) runs every job in
its own process.
"""
from __future__ import annotations

import hashlib
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

SERVED = {"prepare", "tiers", "init", "train", "signal", "merge", "merge-point", "sample", "calibrate", "evaluate",
          "frontier", "claims", "approaches", "science", "front", "families"}
# What the jobs import (torch and transformers through the sampler, TRL's trainers, matplotlib through the
# plots): importing it once is the point of a worker.
PRELOAD = ("transformers.models.qwen2.modeling_qwen2", "ewa.sample.run", "ewa.sample.backends.hf",
           "trl.trainer.grpo_trainer", "ewa.init.sft", "ewa.train.grpo", "ewa.evaluate.run", "ewa.merge.cli",
           "ewa.analysis.plots", "ewa.analysis.claims", "ewa.data.cli")
IDLE_S = float(os.environ.get("EWA_WORKER_IDLE_S", 30))  # then a worker exits
START_S = 120.0  # a worker not listening by then is given up on: the job runs in its own process
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
VOLATILE_ENV = {"PWD", "OLDPWD", "SHLVL", "_"}  # set by each shell; the job's directory travels on its own
# Read only when CUDA starts, which a worker never does (CPU builds only), and each job gets its own value: the
# rules set it for GPU-capable jobs and not for judging, which would otherwise keep a worker of its own.
PER_JOB_ENV = {"PYTORCH_CUDA_ALLOC_CONF"}
HEADER = struct.Struct("!I")
STATUS = struct.Struct("!i")  # the exit code, or minus the signal that ended the child
TAKEN = b"\x01"  # the worker forked the job: from here on the command waits for its STATUS


def worker_address(env: dict[str, str]) -> str:
    """The name of the abstract socket (nothing on disk) a worker for this environment and code listens on."""
    import ewa

    package = Path(ewa.__file__).parent
    state = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.suffix in (".py", ".yaml", ".json") and "__pycache__" not in path.parts:
            st = path.stat()
            state.update(f"{path.relative_to(package)}\0{st.st_mtime_ns}\0{st.st_size}\n".encode())
    import site

    for packages in site.getsitepackages():  # an install or upgrade changes the directory
        if os.path.isdir(packages):
            state.update(f"{packages}\0{os.stat(packages).st_mtime_ns}\n".encode())
    served_env = sorted((k, v) for k, v in env.items() if k not in VOLATILE_ENV | PER_JOB_ENV)
    state.update(json.dumps([sys.executable, served_env]).encode())
    return f"ewa-worker-{os.getuid()}-{state.hexdigest()[:24]}"


def wanted(argv: list[str]) -> bool:
    command = next((a for a in argv if not a.startswith("-")), None)
    return (os.environ.get("EWA_WORKER") == "1" and command in SERVED and "SLURM_JOB_ID" not in os.environ
            and not cuda_build())


def cuda_build() -> bool:
    """Whether the installed torch is built for a GPU, read from its version module without importing torch
    (that import is what a worker saves)."""
    from importlib.util import find_spec

    spec = find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    version = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    return gpu_build(version.read_text()) if version.exists() else True


def gpu_build(version_module: str) -> bool:
    """Whether torch/version.py names a CUDA, ROCm or XPU version."""
    import re

    values = re.findall(r"^(?:cuda|hip|rocm|xpu)\b[^=\n]*=(.*)$", version_module, re.M)
    return any(value.strip() != "None" for value in values)


# --- the command's side ---------------------------------------------------------------------------

def run_in_worker(argv: list[str]) -> int | None:
    """Run `ewa argv` in this environment's worker, starting one if none listens; its exit status, or None
    when no worker could take the job (it then runs in this process)."""
    env = dict(os.environ)
    address = worker_address(env)
    sock = connect(address) or start_worker(address, env)
    if sock is None:
        return None
    with sock:
        umask = os.umask(0)
        os.umask(umask)
        payload = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": env, "umask": umask}).encode()
        pending, sent = [], []  # signals that came before the job was handed over; whether it was
        received = []  # every signal this command received

        def forward(signum, _frame):
            received.append(signum)
            if not sent:
                pending.append(signum)
                return
            try:
                sock.sendall(bytes([signum]))
            except OSError:
                pass  # the job has ended

        previous = {s: signal.signal(s, forward) for s in FORWARDED}
        try:
            try:
                socket.send_fds(sock, [HEADER.pack(len(payload))], [0, 1, 2])
                sock.sendall(payload)
            except OSError:  # the worker went away before it took the job
                return 128 + pending[0] if pending else None
            sent.append(True)
            for signum in pending:
                forward(signum, None)
            # A worker that exits when idle can still have this connection in its queue: it then closes
            # without taking the job, and says nothing. Only a worker that forked the job acknowledges it.
            if receive_exactly(sock, len(TAKEN)) != TAKEN:
                return 128 + received[0] if received else None
            status = receive_exactly(sock, STATUS.size)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
    if status is None:  # the worker died under the job
        print("ewa: error: the worker running this job exited (EWA_WORKER=0 runs jobs in their own process)",
              file=sys.stderr)
        return 1
    code = STATUS.unpack(status)[0]
    return code if code >= 0 else 128 - code


def connect(address: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect("\0" + address)
        return sock
    except OSError:
        sock.close()
        return None


def start_worker(address: str, env: dict[str, str]) -> socket.socket | None:
    """Start a worker for `address` and wait until it listens (or another command's worker does).

    The worker is detached (its parent exits at once): no job's process tree holds it, so Snakemake's
    benchmark of the job that started it does not count the other jobs it serves."""
    ready, ready_w = os.pipe()  # the worker closes its end once it listens, or by exiting
    try:
        # -P: the job's directory must not shadow an installed module in a process that outlives the job
        subprocess.run([sys.executable, "-P", "-m", "ewa.worker_main", address, str(ready_w)], env=env, cwd="/",
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       pass_fds=[ready_w], start_new_session=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        os.close(ready)
        return None
    finally:
        os.close(ready_w)
    with os.fdopen(ready, "rb") as pipe, selectors.DefaultSelector() as selector:
        selector.register(pipe, selectors.EVENT_READ)
        if not selector.select(START_S):
            return None  # still importing: the job runs in its own process
    return connect(address)


def receive_exactly(sock: socket.socket, size: int) -> bytes | None:
    """`size` bytes, or None when the peer closed first (a reset included)."""
    data = b""
    while len(data) < size:
        try:
            chunk = sock.recv(size - len(data))
        except InterruptedError:
            continue
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


# --- the worker's side ----------------------------------------------------------------------------

class Worker:
    """One environment's worker: a listener, and per running job its command's connection and a pidfd."""

    def __init__(self, address: str, run_command):
        self.run_command = run_command  # argv -> exit status, in the child
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind("\0" + address)  # OSError: another command started this worker first
        self.listener.listen(64)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.jobs: dict[int, tuple[socket.socket, int]] = {}  # pid -> (the command's connection, pidfd)

    def serve(self) -> None:
        idle_since = time.monotonic()
        while self.jobs or time.monotonic() - idle_since < IDLE_S:
            for key, _ in self.selector.select(timeout=1.0):
                if key.fileobj is self.listener:
                    self.accept()
                elif key.data[1] not in self.jobs:
                    continue  # ended earlier in this round
                elif key.data[0] == "exit":
                    self.finish(key.data[1])
                else:
                    self.command_spoke(key.data[1])
            if self.jobs:
                idle_since = time.monotonic()
        self.listener.close()  # a command still queued is refused now, not when this process has ended

    def accept(self) -> None:
        conn, _ = self.listener.accept()
        peer = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        if peer[1] != os.getuid():
            conn.close()  # only this user's commands
            return
        conn.settimeout(10.0)
        try:
            header, fds, _, _ = socket.recv_fds(conn, HEADER.size, 3)
            request = json.loads(receive_exactly(conn, HEADER.unpack(header)[0]) or b"")
        except (OSError, ValueError, struct.error):
            conn.close()
            return
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        pid = os.fork()
        if pid == 0:
            conn.close()
            self.close()
            run_child(request, fds, self.run_command)  # never returns
        try:
            os.setpgid(pid, pid)  # here too: a signal forwarded before the child ran its own setpgid finds the group
        except OSError:
            pass  # the child has exec'd or ended already
        for fd in fds:
            os.close(fd)
        try:
            conn.sendall(TAKEN)
        except OSError:
            pass  # the command is gone: its end of stream, read below, kills the job
        conn.setblocking(False)
        pidfd = os.pidfd_open(pid)
        self.jobs[pid] = (conn, pidfd)
        self.selector.register(conn, selectors.EVENT_READ, ("command", pid))
        self.selector.register(pidfd, selectors.EVENT_READ, ("exit", pid))

    def command_spoke(self, pid: int) -> None:
        """The command forwarded signals (a byte per signal number), or is gone (end of stream): the job is
        SIGKILLed then, as it would have been in the command's own process."""
        conn, _ = self.jobs[pid]
        try:
            data = conn.recv(64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        for signum in data:
            signal_group(pid, signum)
        if not data:
            self.selector.unregister(conn)
            signal_group(pid, signal.SIGKILL)

    def finish(self, pid: int) -> None:
        conn, pidfd = self.jobs.pop(pid)
        _, wait_status = os.waitpid(pid, 0)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        if conn.fileno() in self.selector.get_map():
            self.selector.unregister(conn)
        try:
            conn.setblocking(True)
            conn.sendall(STATUS.pack(os.waitstatus_to_exitcode(wait_status)))
        except OSError:
            pass  # the command is gone
        conn.close()

    def close(self) -> None:
        for conn, pidfd in self.jobs.values():
            conn.close()
            os.close(pidfd)
        self.selector.close()
        self.listener.close()


def run_child(request: dict, fds: list[int], run_command) -> None:
    """Become the job (its descriptors, directory, umask, environment and argv), then run its command."""
    code = 1
    try:
        os.setpgid(0, 0)  # its own group: a signal for the job reaches the sandboxes it starts
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for s in FORWARDED[1:]:
            signal.signal(s, signal.SIG_DFL)
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["ewa", *request["argv"]]
        code = run_command(request["argv"])
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()  # what a process's normal end runs: logging and the like flush here
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 1)


def signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def serve(address: str, ready_fd: int, run_command) -> None:
    """Fork the worker off and return (the command that starts it waits for this process), then import,
    listen, and close `ready_fd` to say so; each job runs `run_command(argv)` in a child."""
    if os.fork():
        os._exit(0)
    import importlib

    for module in PRELOAD:
        importlib.import_module(module)
    try:
        worker = Worker(address, run_command)
    except OSError:
        return  # another command started this worker first
    os.close(ready_fd)
    worker.serve()
