"""The one way model-written code runs: rewards, tool calls, agentic feedback and evaluation.

    with sandbox_from_config(config["sandbox"], workers=2) as sb:  # the config's validated section
        result = sb.judge(problem, code)                 # SampleResult with per-test verdicts
        results = sb.judge_many([(problem, code, None)]) # parallel over workers, order kept
        run = sb.run_code("print(input())", stdin="hi")  # RunResult of a free-form tool call

Threat model. Model code is hostile, and under RL it is optimised against the judge: whatever
earns reward gets learnt, including reading the expected outputs. It may loop, sleep, allocate,
fork-bomb, flood output, spawn background processes, open sockets, walk the filesystem for test data,
kill its parent, exit early, monkeypatch builtins, print "all passed", or return objects whose __eq__
always says yes. Defences:
- Filesystem, an allow-list. bwrap: the sandbox's root is an empty read-only tmpfs into which only
  the interpreter (`sandbox.python`, its symlinks recreated), the bin/ and lib/ of its real prefix(es)
  and its import path there, the libraries it links, the system's programs and libraries (/usr/bin,
  /usr/lib*, /lib*, /usr/share/zoneinfo) and the /etc files the loader and libc read (ld.so.cache,
  ld.so.conf*, nsswitch.conf, localtime) are bound read-only, plus a private /tmp and /dev/shm, a
  minimal /dev and the sandbox's own /proc. No dataset, result, home, checkout, /work, /data, /opt,
  /srv, /var or /usr/local/share exists inside, wherever it lives; should a shown directory hold this
  project, the working directory or ewa's own environment (or a path in `hide`), a tmpfs masks it.
  docker: the image (scripts/docker-sandbox-image.sh) holds only the interpreter, its stdlib, /bin/sh,
  a few coreutils and their libraries; nothing of the host is mounted (the engine adds only its own
  /etc/hosts, /etc/hostname, /etc/resolv.conf and a read-only /sys).
  tests/test_sandbox_containment.py checks both: a canary outside the project is unreadable, and a
  walk of every visible directory finds no file of the project or its data.
- No network, private /dev /proc and pid/ipc/uts namespaces, a cleared environment, an unprivileged
  per-worker uid with no capabilities and no_new_privs; the sandbox dies with its parent.
- A seccomp filter, which the fork server installs on itself before anything runs (every backend; it
  does not start without one): namespaces (unshare, setns, clone with namespace flags), mounts,
  ptrace and other processes' memory, keyrings, bpf, perf, userfaultfd, kernel modules, kexec,
  reboot, swap, io_uring and the like fail with EPERM. info() records it.
- A program longer than `max_source_bytes` is CE without being compiled; the rest are compiled by
  their first test's candidate under its limits (a compile over them is MLE or TLE), never by the
  fork server every candidate is forked from.
- rlimits per test (CPU, address space, processes, file size) and capped output pipes; each test's
  process tree is killed afterwards (own session, plus a subreaper sweep) and /tmp is emptied. TLE is
  decided on CPU time, so load does not change verdicts; the wall-clock backstop (for programs that
  sleep or block) is the exception and is recorded apart (TestResult.wall_backstop,
  SampleResult.backstop_kills).
- Verdicts are decided in the host. Stdout is compared here; a functional call's return value comes
  back as data rebuilt into plain builtin values and is compared here against the expected value,
  which never enters the sandbox. Testcode tests run in a separate checker process the candidate cannot
  read or ptrace (non-dumpable); it calls the candidate through pipes, and only its own report of a
  returning check() is AC. The candidate's parent (the zygote) never receives test code, so a candidate
  cannot dig it out of inherited memory. Under the plain semantics the checker receives plain values
  only; under a format's own harness that reproduces a reference running program and test in one process
  (check_correctness) it acts on the program's own objects by handle, as that single process
  does (an object whose __eq__ always says yes passes there, so here too; what the check passes to such
  an object, an expected value say, reaches the candidate): the reference's verdicts, not a stricter judge.
- Killing or stopping the fork server only fails that test: the host sees EOF or a timeout, gives
  RE or TLE, and starts a fresh worker for the next test.
- No silent loss of isolation: `auto` is bwrap, else docker, else a UserError saying why neither
  works; `process` (rlimits only: model code can read every file the uid can) runs only when asked
  for, with a warning once per process. The interpreter is checked at start (found, Python >= 3.9).
Not defended: what the allow-list must show (a benchmark whose answers ship inside the interpreter's
lib/ or the system's libraries, e.g. as an installed package, is readable); a venv as `sandbox.python`
shows that venv's bin/ and lib/; kernel exploits (bwrap and docker share the host kernel); side
channels (timing) between concurrent tests.
"""
from __future__ import annotations

import dataclasses
import os
from concurrent.futures import Future
from typing import Sequence

from ewa.problems import Problem
from ewa.errors import UserError
from ewa.sandbox.backends import (BACKENDS, MIN_PYTHON, SandboxSettings, default_backend, fmt_version,
                                   get_backend)
from ewa.sandbox.judge import Limits, judge_sample, run_free
from ewa.sandbox.pool import Pool, worker_sizing
from ewa.sandbox.results import RunResult, SampleResult

__all__ = ["Sandbox", "SandboxSettings", "BACKENDS", "default_backend", "sandbox_from_config"]


class Sandbox:
    def __init__(self, settings: SandboxSettings, backend: str | None = None, workers: int | None = None,
                 python: str | None = None, time_factor: float | None = None, calibration_path: str | None = None,
                 resumed_time_factor: float | None = None, **options):
        """Start the workers. Explicit arguments override `settings`; `options` are more of its fields.

        Every time limit is multiplied by the time factor: see ewa.sandbox.calibrate.resolve for which
        one applies (`resumed_time_factor`: the one an interrupted job started with).
        """
        given = {"backend": backend, "workers": workers, "python": python, **options}
        self.settings = dataclasses.replace(settings, **{k: v for k, v in given.items() if v is not None})
        self.backend = get_backend(self.settings)  # a UserError saying why it (for auto: none) can run here
        # Default: the CPUs granted to this process (affinity, cgroup quota), shared by a job's ranks.
        self.sizing = None if self.settings.workers else worker_sizing()
        self.workers = self.settings.workers or self.sizing["workers"]
        from ewa.sandbox.calibrate import resolve
        measured = dataclasses.replace(self.settings, backend=self.backend.name, workers=1)  # a calibration run now
        self.calibration = resolve(measured, time_factor, calibration_path, resumed_time_factor)
        self.time_factor = float(self.calibration["time_factor"])
        try:
            self.pool = Pool(self.backend, self.workers)
        except RuntimeError:
            self.backend.check_interpreter()  # one clear line when the interpreter is why
            raise
        self.closed = False
        self.python_version = self.pool.info.get("python", "")
        if tuple(int(x) for x in self.python_version.split(".")[:2] if x.isdigit()) < MIN_PYTHON:
            self.close()
            self.backend.check_interpreter()
            raise UserError(f"sandbox: the fork server runs on Python {self.python_version or '?'}; it needs "
                            f"Python >= {fmt_version(MIN_PYTHON)} (sandbox.python)")

    # -- judging ---------------------------------------------------------------------------------
    def limits(self, time_limit_s: float, memory_limit_mb: float, scaled: bool = True) -> Limits:
        return Limits(cpu_s=time_limit_s * (self.time_factor if scaled else 1.0), memory_mb=memory_limit_mb,
                      output_bytes=self.settings.output_limit_mb << 20,
                      max_processes=self.settings.max_processes if os.geteuid() == 0 else 0,
                      source_bytes=self.settings.max_source_bytes)

    def _submit(self, problem: Problem, code: str | None, tests: Sequence[int] | None, early_stop: bool,
                test_tiers: Sequence[int] | None) -> Future:
        if self.closed:
            raise RuntimeError("this Sandbox is closed")
        limits = self.limits(problem.time_limit_s, problem.memory_limit_mb)
        tests = list(tests) if tests is not None else None
        tiers = list(test_tiers) if test_tiers is not None else None
        return self.pool.submit(lambda w: judge_sample(w, problem, code, tests, early_stop, tiers, limits,
                                                       self.settings.float_tol))

    def judge(self, problem: Problem, code: str | None, tests: Sequence[int] | None = None,
              early_stop: bool = False, test_tiers: Sequence[int] | None = None) -> SampleResult:
        """Judge one sample. `tests`: indices to run in that order (default: all, smallest input
        first); `test_tiers`: tier of every test of the problem, for first_failed_tier."""
        return self._submit(problem, code, tests, early_stop, test_tiers).result()

    def judge_many(self, items: Sequence[tuple], early_stop: bool = False) -> list[SampleResult]:
        """Judge (problem, code, tests_or_None[, test_tiers]) items in parallel; results in order."""
        futures = [self._submit(*item[:3], early_stop, item[3] if len(item) > 3 else None) for item in items]
        return [f.result() for f in futures]

    def submit(self, problem: Problem, code: str | None, tests: Sequence[int] | None = None,
               early_stop: bool = False, test_tiers: Sequence[int] | None = None) -> Future:
        """judge() without waiting: a Future of the SampleResult (for progress bars and streaming)."""
        return self._submit(problem, code, tests, early_stop, test_tiers)

    def run_code(self, code: str, stdin: str = "", time_limit_s: float = 2.0, memory_limit_mb: float = 256,
                 scaled: bool = True, note_asserts: bool = False) -> RunResult:
        """Run code as a program on `stdin` (a tool call); the time limit is scaled by the factor.
        `note_asserts`: a failed assert also reports what its calls returned (a function-call problem's
        tool run, ewa.sandbox.judge.run_free)."""
        if self.closed:
            raise RuntimeError("this Sandbox is closed")
        limits = self.limits(time_limit_s, memory_limit_mb, scaled)
        return self.pool.submit(lambda w: run_free(w, code, stdin, limits, note_asserts)).result()

    def info(self) -> dict:
        """What every result records about how it was judged."""
        return {"backend": self.backend.name, "workers": self.workers, "worker_sizing": self.sizing,
                "python": self.settings.python, "seccomp": self.pool.info.get("seccomp"),
                "time_factor": self.time_factor, "calibration": self.calibration,
                "settings": dataclasses.asdict(self.settings)}

    # -- lifetime ----------------------------------------------------------------------------------
    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.pool.close()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def sandbox_from_config(sandbox: dict, calibration: str | None = None, workers: int | None = None,
                        time_factor: float | None = None, resumed_time_factor: float | None = None) -> Sandbox:
    """The sandbox the config's validated `sandbox` section describes: every stage that runs model code
    (rewards, tool calls, agentic feedback, evaluation, calibration) opens it here, so every key reaches
    all of them. With `calibrate: false` time limits are taken as they are (factor 1)."""
    settings = SandboxSettings(backend=sandbox["backend"], python=sandbox["python"],
                               docker_image=sandbox["docker_image"],
                               max_source_bytes=sandbox.get("max_source_bytes"), workers=workers or 0)
    factor = time_factor if time_factor is not None else (None if sandbox["calibrate"] else 1.0)
    return Sandbox(settings=settings, time_factor=factor, calibration_path=calibration if factor is None else None,
                   resumed_time_factor=resumed_time_factor)
