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
from typing import Callable

from ewa.sandbox.backends import Backend
from ewa.sandbox.forkserver import HEADER

START_TIMEOUT_S = 60.0


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
