"""Workers: one long-lived fork server per worker thread, restarted when a candidate kills it.

Each sandbox is started from its own long-lived thread because bwrap's --die-with-parent fires when
the *thread* that spawned it exits.
"""
from __future__ import annotations

import json
import os
import queue
import select
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Callable

from ewa.sandbox.backends import Backend
from ewa.sandbox.forkserver import HEADER

START_TIMEOUT_S = 60.0


def cpu_quota(root: str = "/sys/fs/cgroup", cgroup_file: str = "/proc/self/cgroup") -> float | None:
    """CPUs this process's cgroup quota grants (v2 `cpu.max`, v1 `cpu.cfs_quota_us / cpu.cfs_period_us`;
    the tightest along its cgroup path, which a container may show only from its own level down), or
    None when no quota applies or none can be read."""
    try:
        lines = Path(cgroup_file).read_text().splitlines()
    except OSError:
        return None
    quotas = []
    for line in lines:
        hierarchy, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hierarchy == "0" and not controllers:  # v2: one tree, the cpu controller's file in each cgroup
            base, files = Path(root), ("cpu.max",)
        elif "cpu" in controllers.split(","):  # v1: the cpu controller's own mount
            base = next((Path(root) / d for d in (controllers, "cpu", "cpu,cpuacct") if (Path(root) / d).is_dir()),
                        None)
            files = ("cpu.cfs_quota_us", "cpu.cfs_period_us")
        else:
            continue
        if base is None:
            continue
        rel = Path(path.lstrip("/"))
        for level in [rel, *rel.parents]:
            try:
                # v2 "quota period" in one file; v1 the quota, then the period, in two
                words = [w for f in files for w in (base / level / f).read_text().split()]
                if words[0] not in ("max", "-1") and float(words[1]) > 0:
                    quotas.append(float(words[0]) / float(words[1]))
            except (OSError, IndexError, ValueError):
                continue
    return min(quotas) if quotas else None


def ranks_on_node(env=None) -> int:
    """Ranks of one training job that share this node (torchrun and accelerate set LOCAL_WORLD_SIZE;
    WORLD_SIZE alone is taken as a single-node job); 1 outside such a job."""
    env = os.environ if env is None else env
    for key in ("LOCAL_WORLD_SIZE", "WORLD_SIZE"):
        try:
            n = int(env.get(key, ""))
        except ValueError:
            continue
        if n > 0:
            return n
    return 1


def worker_sizing(env=None, cgroup_root: str = "/sys/fs/cgroup", cgroup_file: str = "/proc/self/cgroup") -> dict:
    """How many fork servers by default: the CPUs this process may run on (affinity: taskset, SLURM's
    binding, a cpuset), capped by the cgroup CPU quota (SLURM, Kubernetes, docker --cpus; a fraction of a
    CPU counts down), shared among the ranks of a training job on this node; at least one."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = os.cpu_count() or 1
    quota = cpu_quota(cgroup_root, cgroup_file)
    cpus = min(affinity, max(1, int(quota))) if quota is not None else affinity
    ranks = ranks_on_node(env)
    return {"workers": max(1, cpus // ranks), "affinity_cpus": affinity, "cgroup_quota_cpus": quota,
            "ranks_on_node": ranks}


class WorkerDied(Exception):
    """The fork server ended mid-request (e.g. the candidate killed it)."""


class WorkerTimeout(Exception):
    """The fork server did not answer in time (e.g. the candidate stopped it); it has been killed."""


class Worker:
    def __init__(self, backend: Backend, index: int):
        self.backend, self.index = backend, index
        self.proc: subprocess.Popen | None = None
        self.info: dict = {}
        self.starts = 0

    def start(self) -> None:
        self.log = tempfile.TemporaryFile()
        self.started_at = time.time()
        self.proc = subprocess.Popen(self.backend.command(self.index), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, env=self.backend.popen_env(),
                                     bufsize=0, close_fds=True)
        self.starts += 1
        try:
            hello = self._read(time.monotonic() + START_TIMEOUT_S)
        except (WorkerTimeout, WorkerDied):  # e.g. the backend could not start it: its log says why
            hello = None
        if not hello or not hello.get("ready"):
            tail = self.log_tail()
            self.kill()
            raise RuntimeError(f"sandbox backend {self.backend.name!r}: worker failed to start: {tail}")
        self.info = hello

    def log_tail(self, n: int = 2000) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-n:].strip()

    def request(self, msg: dict, timeout: float) -> dict:
        if self.proc is None:
            self.start()
        data = json.dumps(msg, separators=(",", ":")).encode()
        deadline = time.monotonic() + timeout
        self._write(HEADER.pack(len(data)) + data, deadline)
        return self._read(deadline)

    def _write(self, data: bytes, deadline: float) -> None:
        fd, view = self.proc.stdin.fileno(), memoryview(data)
        os.set_blocking(fd, False)
        while view:
            if not select.select([], [fd], [], max(0.0, deadline - time.monotonic()))[1]:
                self.kill()
                raise WorkerTimeout("the sandbox worker stopped reading")
            try:
                view = view[os.write(fd, view[:1 << 16]):]
            except BlockingIOError:
                continue
            except OSError:
                self.kill()
                raise WorkerDied("the sandbox worker died") from None

    def _read_exact(self, n: int, deadline: float) -> bytes:
        fd, chunks = self.proc.stdout.fileno(), []
        while n:
            if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                self.kill()
                raise WorkerTimeout("the sandbox worker did not answer in time")
            chunk = os.read(fd, min(n, 1 << 20))
            if not chunk:
                self.kill()
                raise WorkerDied("the sandbox worker died")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _read(self, deadline: float) -> dict:
        (n,) = HEADER.unpack(self._read_exact(HEADER.size, deadline))
        return json.loads(self._read_exact(n, deadline))

    def kill(self) -> None:
        """Kill the sandbox (bwrap takes its whole pid namespace with it) and whatever it left."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        proc.kill()
        proc.wait()
        for f in (proc.stdin, proc.stdout):
            f.close()
        self.backend.cleanup(self.index, self.started_at)

    def close(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()  # EOF: the router exits, taking its zygote with it
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class Pool:
    """A thread per worker pulling tasks `fn(worker)` from one queue; futures keep submission order."""

    def __init__(self, backend: Backend, workers: int):
        self.backend = backend
        self.tasks: queue.SimpleQueue = queue.SimpleQueue()
        self.ready = [threading.Event() for _ in range(workers)]
        self.errors: list[BaseException] = []
        self.info: dict = {}  # the first worker's hello: interpreter version, uid
        self.threads = [threading.Thread(target=self._loop, args=(i,), daemon=True, name=f"sandbox-{i}")
                        for i in range(workers)]
        for t in self.threads:
            t.start()
        for event in self.ready:
            event.wait()
        if self.errors:
            self.close()
            raise self.errors[0]

    def _loop(self, index: int) -> None:
        worker = Worker(self.backend, index)
        try:
            worker.start()
            self.info = self.info or worker.info
        except BaseException as e:
            self.errors.append(e)
        finally:
            self.ready[index].set()
        while (item := self.tasks.get()) is not None:
            fn, fut = item
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn(worker))
                except BaseException as e:
                    fut.set_exception(e)
        worker.close()

    def submit(self, fn: Callable) -> Future:
        fut: Future = Future()
        self.tasks.put((fn, fut))
        return fut

    def close(self) -> None:
        for _ in self.threads:
            self.tasks.put(None)
        for t in self.threads:
            t.join()
