"""Hostile candidates on the real sandbox: each gets the right failing verdict and the next sample
on the same worker (one worker per sandbox) still runs correctly."""
from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

from helpers import docker_image_ready, private_uid

import ewa
from ewa.problems import Problem, make_test
from ewa.verdicts import AC, MLE, RE, TLE, WA

pytestmark = pytest.mark.timeout(300)
PROJECT = Path(ewa.__file__).resolve().parents[2]
SECRET = f"ewa-secret-{uuid.uuid4().hex}"


def problem(pid, testtype, tests, func_name=None):
    return Problem(id=pid, source="t", difficulty="easy", statement="", testtype=testtype, tests=tuple(tests),
                   func_name=func_name, time_limit_s=0.5, memory_limit_mb=128)


ECHO = problem("echo", "stdin", [make_test("hello\n", "hello\n")])
ADD = problem("add", "functional", [make_test("1\n2", "3")], func_name="add")
# The expected values live only in the test code, next to a secret a candidate must not find.
TC = problem("tc", "testcode", [make_test(
    f"TOKEN = {SECRET!r}\n\ndef check(candidate):\n    assert candidate(1, 2) == 3\n"
    "    assert abs(candidate(0.5, 0.25) - 0.75) < 1e-9\n", "")], func_name="add")
GOOD = {ECHO: "print(input())\n", ADD: "def add(a, b):\n    return a + b\n", TC: "def add(a, b):\n    return a + b\n"}
CENSUS = problem("census", "stdin", [make_test("", "0")])
# Counts live processes of our uid other than us, our zygote and its router: left-overs of earlier tests.
CENSUS_CODE = """
import os
me, skip = os.getuid(), {os.getpid(), os.getppid()}
skip.add(int(open(f"/proc/{os.getppid()}/stat").read().rsplit(")", 1)[1].split()[1]))
n = 0
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) not in skip:
        try:
            status = dict(l.split(":", 1) for l in open(f"/proc/{p}/status") if ":" in l)
        except OSError:
            continue
        n += int(status["Uid"].split()[0]) == me and not status["State"].strip().startswith(("Z", "X"))
print(n)
"""
SNOOP = """
import os, re
PATTERN = re.compile(rb"ewa-secret-[0-9a-f]{32}")  # matches the secret, not this source
def leaks(pid):
    try:
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", buffering=0)
    except OSError:
        return False
    with mem:
        for line in maps:
            addr, perms = line.split()[:2]
            lo, hi = (int(x, 16) for x in addr.split("-"))
            if perms[0] == "r" and hi - lo <= (32 << 20):
                try:
                    mem.seek(lo)
                    if PATTERN.search(mem.read(hi - lo)):
                        return True
                except (OSError, ValueError, OverflowError):
                    pass
    return False
FOUND = any(leaks(p) for p in os.listdir("/proc") if p.isdigit())
def add(a, b):
    return a + b if FOUND else -1
"""

ISOLATION = "isolation"  # only the bwrap backend isolates; `process` is rlimits only
CASES = {
    "fork_bomb": (ECHO, "import os\nwhile True:\n    try:\n        if os.fork() == 0:\n            os.setsid()\n"
                        "    except OSError:\n        pass\n", {TLE}, None),
    "memory_bomb": (ECHO, "x = bytearray(1 << 31)\nprint(input())\n", {MLE}, None),
    "memory_creep": (ECHO, "a = []\nwhile True:\n    a.append(bytearray(1 << 20))\n", {MLE}, None),
    "infinite_loop": (ECHO, "while True:\n    pass\n", {TLE}, None),
    "sleep_forever": (ECHO, "import time\ntime.sleep(600)\n", {TLE}, None),
    "flood_stdout": (ECHO, "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", {WA}, None),
    "flood_stderr": (ECHO, "import os\nwhile True:\n    os.write(2, b'x' * 65536)\n", {WA}, None),
    "flood_file": (ECHO, "with open('big', 'wb') as f:\n    while True:\n        f.write(b'x' * (1 << 20))\n", {RE}, None),
    "read_shadow": (ECHO, "print(open('/etc/shadow').read())\n", {RE}, None),
    "read_project": (ECHO, f"print(open({str(PROJECT / 'pyproject.toml')!r}).read())\n", {RE}, ISOLATION),
    "write_outside_tmp": (ECHO, "open('/var/tmp/{token}', 'w').write('x')\nprint(input())\n", {RE}, ISOLATION),
    "kill_parent": (ECHO, "import os\nos.kill(os.getppid(), 9)\nprint(input())\n", {RE}, None),
    "kill_parent_group": (ECHO, "import os\nos.killpg(os.getpgid(os.getppid()), 9)\nprint(input())\n", {RE}, None),
    "kill_everything": (TC, "import os\nos.kill(-1, 9)\ndef add(a, b):\n    return a + b\n", {RE}, None),
    "kill_parent_functional": (ADD, "import os\ndef add(a, b):\n    os.kill(os.getppid(), 9)\n    return a + b\n",
                               {RE}, None),
    "exit_before_checker": (TC, "import os\ndef add(a, b):\n    return a + b\nos._exit(0)\n", {RE}, None),
    "exit_before_result": (ADD, "import os\ndef add(a, b):\n    os._exit(0)\n", {RE}, None),
    "fake_all_passed": (TC, "print('All tests passed!')\nraise SystemExit(0)\n", {RE}, None),
    "fake_result_print": (ADD, "print(3)\nraise SystemExit(0)\n", {RE}, None),
    "always_equal": (TC, "def add(a, b):\n    class Yes:\n        def __eq__(self, o): return True\n"
                         "        def __sub__(self, o): return 0\n    return Yes()\n", {RE}, None),
    "int_subclass": (ADD, "class I(int):\n    def __eq__(self, o): return True\ndef add(a, b):\n    return I(0)\n",
                     {RE}, None),
    "monkeypatch_builtins": (TC, "import builtins\nbuiltins.abs = lambda x: 0\n"
                                 "builtins.AssertionError = type('Nope', (Exception,), {})\n"
                                 "def add(a, b):\n    return a - b\n", {WA}, None),
    "snoop_memory_for_tests": (TC, SNOOP, {WA}, None),
}


@pytest.fixture(scope="module", params=["bwrap", "process", pytest.param("docker", marks=pytest.mark.docker)])
def sb(request, sandbox_factory):
    """One worker per backend, so the sample after a hostile one runs on the worker it attacked."""
    if request.param == "docker" and not docker_image_ready():
        pytest.skip("no Docker engine with ewa-sandbox:latest (make docker-sandbox builds it)")
    # Without pid namespaces (process backend) a uid nobody else uses keeps kill(-1) and the
    # process census away from other sandboxes running on this machine.
    uid = private_uid() if request.param == "process" else None
    return sandbox_factory(backend=request.param, workers=1, uid=uid)


def assert_next_sample_runs(sb, prob=ECHO):
    assert sb.judge(prob, GOOD[prob]).verdict == AC


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_candidate_fails_and_next_sample_runs(sb, case):
    prob, code, verdicts, scope = CASES[case]
    if scope == ISOLATION and not sb.backend.isolated:
        pytest.skip("isolation-only case")
    token = uuid.uuid4().hex
    r = sb.judge(prob, code.replace("{token}", token))
    assert r.verdict in verdicts, (case, r)
    assert not Path(f"/var/tmp/{token}").exists()
    assert_next_sample_runs(sb, prob)


def test_flood_is_cut_at_the_output_limit(sb):
    r = sb.judge(ECHO, CASES["flood_stdout"][1])
    assert r.tests[0].error == "output limit exceeded"


def test_reading_root_finds_nothing(sb):
    secret = Path(f"/root/.ewa-test-{uuid.uuid4().hex}")
    secret.write_text(SECRET)
    try:
        r = sb.run_code(f"import os\nprint(os.listdir('/root'))\nprint(open({str(secret)!r}).read())\n")
    finally:
        secret.unlink()
    assert r.status == RE and SECRET not in r.stdout + r.stderr


def test_background_processes_do_not_survive_the_test(sb):
    orphan_maker = ("import os, subprocess\nsubprocess.Popen(['sleep', '300'], start_new_session=True)\n"
                    "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        import time\n"
                    "        time.sleep(300)\n    os._exit(0)\nprint(input())\n")
    assert sb.judge(ECHO, orphan_maker).verdict == AC
    census = sb.judge(CENSUS, CENSUS_CODE)
    assert census.verdict == AC, census.tests[0]


def test_stopping_the_fork_server_is_a_timeout(sb):
    if not sb.backend.isolated:
        pytest.skip("same host-side timeout path as bwrap; saves 8 s")
    r = sb.judge(ECHO, "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\nprint(input())\n")
    assert r.verdict == TLE
    assert_next_sample_runs(sb)


def test_no_network(sb):
    if not sb.backend.isolated:
        pytest.skip("isolation-only case")
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        r = sb.judge(ECHO, f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
                           "print(input())\n")
        server.settimeout(0.2)
        with pytest.raises(TimeoutError):
            server.accept()
    assert r.verdict == RE and "Error" in r.tests[0].error


def test_private_tmp_is_emptied_between_tests(sb):
    if not sb.backend.isolated:
        pytest.skip("isolation-only case")
    token = uuid.uuid4().hex
    assert sb.run_code(f"open('/tmp/{token}', 'w').write('x')").status == "ok"
    assert not Path(f"/tmp/{token}").exists()
    assert sb.run_code("import os\nprint(os.listdir('/tmp'), os.listdir('/dev/shm'))").stdout == "[] []\n"


def test_no_capabilities_no_secrets_in_environment(sb):
    os.environ["EWA_FAKE_TOKEN"] = SECRET
    try:
        r = sb.run_code("import os\nprint(os.getuid(), dict(os.environ))\n"
                        "print([l for l in open('/proc/self/status') if l.startswith('CapEff')])")
    finally:
        del os.environ["EWA_FAKE_TOKEN"]
    assert r.status == "ok" and SECRET not in r.stdout
    assert int(r.stdout.split()[0]) != 0 and "0000000000000000" in r.stdout
