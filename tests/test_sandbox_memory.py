"""MLE is resource use (an allocation failed under the address-space limit, as the fork server's runner
reports on its own pipe, or peak memory at the limit), never what a program prints or raises itself.
Run on every backend, like the adversarial suite."""
from __future__ import annotations

import warnings

import pytest

from helpers import private_uid, sandbox_settings

from ewa.problems import Problem, make_test
from ewa.sandbox import Sandbox, default_backend
from ewa.verdicts import AC, MLE, RE

pytestmark = pytest.mark.timeout(300)


def problem(pid, testtype, tests, func_name=None, judge=""):
    return Problem(id=pid, source="t", difficulty="easy", statement="", testtype=testtype, tests=tuple(tests),
                   func_name=func_name, time_limit_s=1.0, memory_limit_mb=128, judge=judge)


ECHO = problem("echo", "stdin", [make_test("hello\n", "hello\n")])
ECHO_LCB = problem("echo-lcb", "stdin", [make_test("hello\n", "hello\n")], judge="livecodebench")
ADD = problem("add", "functional", [make_test("1\n2", "3")], func_name="add")
TC = problem("tc", "testcode", [make_test("def check(candidate):\n    assert candidate(1, 2) == 3\n", "")],
             func_name="add")
GOOD = {ECHO: "print(input())\n", ECHO_LCB: "print(input())\n", ADD: "def add(a, b):\n    return a + b\n",
        TC: "def add(a, b):\n    return a + b\n"}
BIG = "bytearray(1 << 31)"  # far over the 128 MB limit

CASES = {
    # Text only: the old judge read the last stderr line.
    "prints MemoryError and crashes": (
        ECHO, "import os, sys\nsys.stderr.write('Traceback (most recent call last):\\nMemoryError\\n')\n"
              "sys.stderr.flush()\nos._exit(1)\n", RE),
    "prints MemoryError: message and exits 1": (
        ECHO, "import sys\nprint('MemoryError: cannot allocate', file=sys.stderr)\nsys.exit(1)\n", RE),
    "lcb: prints MemoryError and crashes": (
        ECHO_LCB, "import os, sys\nsys.stderr.write('MemoryError\\n')\nsys.stderr.flush()\nos._exit(1)\n", RE),
    # Raised by the program, not by an allocation.
    "raises MemoryError": (ECHO, "raise MemoryError\n", RE),
    "raises MemoryError in a function": (ECHO, "def f():\n    raise MemoryError('fake')\nf()\n", RE),
    "functional raises MemoryError": (ADD, "def add(a, b):\n    raise MemoryError\n", RE),
    "testcode candidate raises MemoryError": (TC, "def add(a, b):\n    raise MemoryError\n", RE),
    # Real allocation failures under RLIMIT_AS.
    "allocates beyond the limit at once": (ECHO, f"x = {BIG}\nprint(input())\n", MLE),
    "creeps up to the limit": (ECHO, "a = []\nwhile True:\n    a.append(bytearray(1 << 20))\n", MLE),
    "re-raises a real MemoryError": (
        ECHO, f"try:\n    x = {BIG}\nexcept MemoryError as e:\n    print('cleaning up')\n    raise e\n", MLE),
    "real MemoryError inside a deep call": (
        ECHO, f"def f(k):\n    return {BIG} if k == 0 else f(k - 1)\nf(50)\n", MLE),
    "functional allocates beyond the limit": (ADD, f"def add(a, b):\n    return len({BIG})\n", MLE),
    "testcode candidate allocates beyond the limit": (TC, f"def add(a, b):\n    return len({BIG})\n", MLE),
    "lcb: allocates beyond the limit": (ECHO_LCB, f"x = {BIG}\nprint(input())\n", MLE),
    "lcb: creeps up to the limit": (ECHO_LCB, "a = []\nwhile True:\n    a.append(bytearray(1 << 20))\n", MLE),
}


def docker_image_ready(image: str = "ewa-sandbox:latest") -> bool:
    import shutil
    import subprocess
    return bool(shutil.which("docker")) and subprocess.run(
        ["docker", "image", "inspect", image], capture_output=True).returncode == 0


@pytest.fixture(scope="module", params=["bwrap", "process", pytest.param("docker", marks=pytest.mark.docker)])
def sb(request):
    if request.param == "bwrap" and default_backend(sandbox_settings()) != "bwrap":
        pytest.skip("bubblewrap is not usable here")
    if request.param == "docker" and not docker_image_ready():
        pytest.skip("no Docker engine with ewa-sandbox:latest (make docker-sandbox builds it)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        uid = private_uid() if request.param == "process" else None
        with Sandbox(sandbox_settings(), backend=request.param, workers=1, time_factor=1.0, uid=uid) as sandbox:
            yield sandbox


@pytest.mark.parametrize("case", sorted(CASES))
def test_mle_only_from_resource_use(sb, case):
    prob, code, verdict = CASES[case]
    r = sb.judge(prob, code)
    assert r.verdict == verdict, (case, r)
    assert sb.judge(prob, GOOD[prob]).verdict == AC


def test_tool_calls_judge_memory_the_same_way(sb):
    assert sb.run_code(f"x = {BIG}", memory_limit_mb=64).status == MLE
    fake = sb.run_code("import sys\nprint('MemoryError', file=sys.stderr)\nsys.exit(1)", memory_limit_mb=64)
    assert fake.status == RE and fake.stderr.strip() == "MemoryError"
    assert sb.run_code("raise MemoryError", memory_limit_mb=64).status == RE
