"""Tests per second for a trivial stdin program (`print(input())`) with 2 workers, three ways:
a new python3 subprocess per test (the naive baseline, no isolation), a new bwrap sandbox per
test, and the fork server inside long-lived bwrap sandboxes (ewa.sandbox). Prints the ratios.

    .venv/bin/python benchmarks/sandbox.py [--tests 400] [--workers 2] [--smoke]
"""
from __future__ import annotations

import argparse
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from ewa.config import section
from ewa.problems import Problem, make_test
from ewa.sandbox import Sandbox, SandboxSettings
from ewa.sandbox.backends import Bwrap, drop_privileges

CODE = "print(input())"
PYTHON = "/usr/bin/python3"
SANDBOX = section("sandbox")  # the schema's defaults
SETTINGS = SandboxSettings(python=PYTHON, docker_image=SANDBOX["docker_image"],
                           max_source_bytes=SANDBOX["max_source_bytes"])


def per_process(cmd: list[str], n: int, workers: int) -> float:
    def one(_):
        out = subprocess.run(cmd, input="hello\n", capture_output=True, text=True, env=Bwrap(SETTINGS).env())
        assert out.stdout == "hello\n", out.stderr
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(n)))
    return n / (time.perf_counter() - start)


def fork_server(n: int, workers: int) -> float:
    problem = Problem(id="echo", source="bench", difficulty="", statement="", testtype="stdin",
                      tests=(make_test("hello\n", "hello\n"),))
    with Sandbox(SETTINGS, backend="bwrap", workers=workers, time_factor=1.0) as sb:
        sb.judge_many([(problem, CODE, None)] * (2 * workers))  # warm: workers started
        start = time.perf_counter()
        results = sb.judge_many([(problem, CODE, None)] * n)
        rate = n / (time.perf_counter() - start)
    assert all(r.verdict == "AC" for r in results)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=400)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="10 tests a way (checks the benchmark runs)")
    args = parser.parse_args()
    if args.smoke:
        args.tests = 10
    bwrap = Bwrap(SETTINGS).command(0)
    sandboxed = [*bwrap[:bwrap.index("--") + 1], *drop_privileges(65534), PYTHON, "-s", "-B", "-c", CODE]
    rates = {
        "naive: python3 subprocess per test": per_process([PYTHON, "-s", "-B", "-c", CODE], args.tests, args.workers),
        "bwrap sandbox per test": per_process(sandboxed, args.tests, args.workers),
        "fork server in bwrap (ewa.sandbox)": fork_server(5 * args.tests, args.workers),
    }
    naive = rates["naive: python3 subprocess per test"]
    print(f"{'method':40s} {'tests/s':>9s} {'vs naive':>9s}   ({args.workers} workers)")
    for name, rate in rates.items():
        print(f"{name:40s} {rate:9.0f} {rate / naive:8.2f}x")
    print(f"ratio fork-server / naive: {rates['fork server in bwrap (ewa.sandbox)'] / naive:.2f}x (target >= 4x)")


if __name__ == "__main__":
    main()
