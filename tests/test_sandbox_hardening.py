"""The fork server's hardening, on the real sandbox: a seccomp filter refuses the syscalls no program
needs (namespaces, mounts, tracing, keyrings, bpf, ...) on every backend, an oversized program is CE
without being compiled, and a program is compiled under its tests' limits, never in the fork server."""
from __future__ import annotations

import platform

import pytest

from helpers import private_uid

from ewa.problems import Problem, make_test
from ewa.verdicts import AC, CE, MLE, TLE

pytestmark = pytest.mark.timeout(120)

# Syscall numbers written out here, not taken from the fork server's table, so a wrong entry there fails.
SYSCALLS = {
    "x86_64": {"unshare": 272, "setns": 308, "mount": 165, "ptrace": 101, "keyctl": 250, "bpf": 321,
               "perf_event_open": 298, "userfaultfd": 323, "process_vm_readv": 310, "init_module": 175,
               "clone": 56, "clone3": 435},
    "aarch64": {"unshare": 97, "setns": 268, "mount": 40, "ptrace": 117, "keyctl": 219, "bpf": 280,
                "perf_event_open": 241, "userfaultfd": 282, "process_vm_readv": 270, "init_module": 105,
                "clone": 220, "clone3": 435},
}
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
# Each call's arguments are valid enough that without the filter it succeeds or fails otherwise
# (unshare and clone succeed, mount EFAULT, keyctl and bpf EINVAL, ...): only the filter says EPERM.
PROBE = """
import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
NR = {nr!r}

def call(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_ulong(a) for a in args])
    if r == 0 and name == "clone":
        os._exit(0)  # the child of an unfiltered clone
    print(name, r, os.strerror(ctypes.get_errno()) if r == -1 else "succeeded", flush=True)

call("unshare", {newuser})
call("setns", 0, 0)
call("mount", 0, 0, 0, 0, 0)
call("keyctl", 0, 0, 0, 0)
call("bpf", 0, 0, 0)
call("perf_event_open", 0, 0, 0, 0, 0)
call("userfaultfd", 0)
call("process_vm_readv", os.getpid(), 0, 0, 0, 0, 0)
call("init_module", 0, 0, 0)
call("clone", {newuser} | {sigchld}, 0, 0, 0, 0)
call("clone3", 0, 0)
call("ptrace", 0, 0, 0, 0)
"""
DENIED = ("unshare", "setns", "mount", "keyctl", "bpf", "perf_event_open", "userfaultfd", "process_vm_readv",
          "init_module", "clone", "ptrace")
# What must keep working under the filter: threads (clone3 refused, libc falls back to clone), fork,
# a subprocess.
ORDINARY = """
import os, subprocess, threading
out = []
t = threading.Thread(target=out.append, args=("thread",))
t.start(); t.join()
pid = os.fork()
if pid == 0:
    os._exit(7)
out.append(f"fork {os.waitpid(pid, 0)[1] >> 8}")
out.append(subprocess.run(["echo", "subprocess"], capture_output=True, text=True).stdout.strip())
out.append(open("/proc/self/status").read().split("Seccomp:")[1].split()[0])
print(*out, sep="; ")
"""


def problem(pid="p", time_limit_s=2.0, memory_limit_mb=256) -> Problem:
    return Problem(id=pid, source="t", difficulty="easy", statement="", testtype="stdin",
                   tests=(make_test("7\n", "7\n"), make_test("8\n", "8\n")), time_limit_s=time_limit_s,
                   memory_limit_mb=memory_limit_mb)


def probe_code() -> str:
    machine = platform.machine()
    if machine not in SYSCALLS:
        pytest.skip(f"no syscall numbers for {machine}")
    return PROBE.format(nr=SYSCALLS[machine], newuser=CLONE_NEWUSER, sigchld=SIGCHLD)


@pytest.mark.parametrize("backend", ["bwrap", "process"])
def test_seccomp_refuses_namespaces_mounts_tracing_and_kernel_interfaces(sandbox_factory, backend):
    sb = sandbox_factory(backend, workers=1, uid=private_uid() if backend == "process" else None)
    run = sb.run_code(probe_code())
    assert run.status == "ok", run.stderr
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert set(lines) == {*DENIED, "clone3"}, run.stdout
    for name in DENIED:
        assert lines[name] == "-1 Operation not permitted", (name, lines[name])
    assert lines["clone3"] == "-1 Function not implemented"
    assert sb.info()["seccomp"] is True


@pytest.mark.parametrize("backend", ["bwrap", "process"])
def test_ordinary_programs_still_thread_fork_and_spawn_under_the_filter(sandbox_factory, backend):
    sb = sandbox_factory(backend, workers=1, uid=private_uid() if backend == "process" else None)
    run = sb.run_code(ORDINARY)
    assert (run.status, run.stdout) == ("ok", "thread; fork 7; subprocess; 2\n"), run.stderr


def test_oversized_source_is_ce_without_compiling(sandbox):
    limit = sandbox.settings.max_source_bytes
    assert limit == 1 << 20  # the schema's default reaches the sandbox
    fits = "print(input())\n" + "#" * (limit - 16) + "\n"
    assert len(fits) == limit
    assert sandbox.judge(problem(), fits).verdict == AC
    over = fits + "#"
    result = sandbox.judge(problem(), over)
    assert (result.verdict, result.tests_passed, len(result.tests)) == (CE, 0, 1)
    assert result.tests[0].error == f"source is {limit + 1} bytes, over the {limit}-byte limit"
    run = sandbox.run_code(over)
    assert run.stderr == f"source is {limit + 1} bytes, over the {limit}-byte limit" and run.exit_code is None


def zygote_peak_rss_mb(sb) -> float:
    """Peak RSS of the fork server's zygote, as its child (a candidate) reads it."""
    run = sb.run_code("import os\nprint(open(f'/proc/{os.getppid()}/status').read())")
    assert run.status == "ok", run.stderr
    return next(int(line.split()[1]) for line in run.stdout.splitlines() if line.startswith("VmHWM:")) / 1024


def test_compile_over_the_memory_limit_is_mle_and_does_not_grow_the_fork_server(sandbox_factory):
    sb = sandbox_factory(workers=1, max_source_bytes=4 << 20)
    # A literal whose compile needs more than the 128 MB limit: compiled by the zygote, it would grow it as much.
    literal = "x = [" + ",".join(map(str, range(200_000))) + "]\nprint(input())\n"
    result = sb.judge(problem(memory_limit_mb=128), literal)
    assert (result.verdict, len(result.tests)) == (MLE, 1), result.tests[0].error
    assert result.tests[0].error == "compiling the program ran out of memory (limit 128 MB)"
    assert zygote_peak_rss_mb(sb) < 80
    assert sb.judge(problem(), "print(input())\n").verdict == AC
    # Nested too deeply to parse: CPython's parser says MemoryError, far below any limit; a CE.
    nested = sb.judge(problem(), "x = " + "-" * 100_000 + "1\nprint(input())\n")
    assert nested.verdict == CE and "too complex to parse" in nested.tests[0].error


def test_compile_over_the_time_limit_is_tle_and_under_it_is_not_the_tests_time(sandbox_factory):
    sb = sandbox_factory(workers=1, max_source_bytes=4 << 20)
    literal = "x = [" + ",".join(map(str, range(200_000))) + "]\nprint(input())\n"  # compiles in well over 0.02 s
    result = sb.judge(problem(time_limit_s=0.02, memory_limit_mb=1024), literal)
    assert result.verdict == TLE, result.tests[0].error
    assert result.tests[0].error == "compiling the program took over the 0.02 s time limit"
    # With time for it, the first test (which compiled) is timed like the second: the program's own CPU.
    result = sb.judge(problem(time_limit_s=2.0, memory_limit_mb=1024), literal)
    assert result.verdict == AC and all(t.cpu_time_s < 0.15 for t in result.tests), result.tests
