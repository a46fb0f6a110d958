"""The answers real models give in the tools setting: a Qwen2.5-Coder-Instruct that runs its program
with the tool and then only says it works has no submission under `sample.tools.submit: restated` (CE,
kept apart as `no_answer`) and submits the program it ran under `last_run`. Transcripts are written as
that model writes them (native `<tool_call>` JSON, then prose with or without the program) and go
through TRL's Qwen2.5 template, the tokenizer's response parser, the real sandbox, `ewa evaluate` and
`ewa frontier`; only the model's text is replayed."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from trl.chat_template_utils import qwen2_5_chat_template

from helpers import SUM_OK, requires_bwrap, sample_settings

from ewa.analysis.behaviour import COLUMNS, behaviour_table
from ewa.chat import add_response_parser
from ewa.cli import main
from ewa.init.tiny import train_tokenizer
from ewa.io import write_jsonl
from ewa.problems import Problem, make_test, write_problems
from ewa.sample.backends import Completion
from ewa.sample.run import RECORD_FIELDS, record
from ewa.sample.settings import setting_class

pytestmark = [pytest.mark.timeout(300), requires_bwrap]

WRONG = "a, b = input().split()\nprint(a + b)\n"  # concatenates: "12" for "1 2"
CRASH = "a, b = map(int, input())\nprint(a + b)\n"  # unpacks the characters of the line: ValueError


def call(code: str, stdin: str | None = "1 2\n") -> str:
    """A python call as Qwen2.5-Coder-Instruct writes it: `<tool_call>`, one line of JSON, `</tool_call>`."""
    arguments = {"code": code, **({"stdin": stdin} if stdin is not None else {})}
    return "<tool_call>\n" + json.dumps({"name": "python", "arguments": arguments}) + "\n</tool_call>"


def block(code: str) -> str:
    return f"```python\n{code}```"


OPENER = "To solve this problem, we read the two integers from standard input and print their sum. "
# Per case, the model's turns; each tool call is answered by the real sandbox in between.
SCRIPTS = {
    # runs its program, then only says so: the case the miniature never shows
    "works": [OPENER + "Let's test the solution with the example input.\n" + call(SUM_OK),
              "The output is `3`, which matches the expected output. The solution works."],
    # runs it, then restates it
    "restate": [OPENER + "Let's verify it with the sample input.\n" + call(SUM_OK),
                "The code produces the correct output `3`. Here is the final solution:\n\n" + block(SUM_OK)
                + "\n\nThis program reads two integers and prints their sum."],
    # several blocks outside tool calls, after a run: the last one
    "blocks": [OPENER + "Let me check a first version.\n" + call(WRONG),
               "The output is `12`: the strings were concatenated. A first idea was\n\n" + block(WRONG)
               + "\n\nbut the values must be converted to integers first:\n\n" + block(SUM_OK)],
    # a call that crashed, then a restated fix
    "crash_fix": [OPENER + "Let me run it.\n" + call(CRASH),
                  "The error occurs because `input()` returns a string and `map` iterates over its "
                  "characters. We need to split the line first. Here is the corrected code:\n\n" + block(SUM_OK)],
    # a draft restated, then a fix run and never restated
    "draft_then_fix": ["Here is my solution:\n\n" + block(WRONG) + "\n\nLet me test it.\n" + call(WRONG),
                       "The output `12` is wrong: the inputs are strings. Let me fix that.\n" + call(SUM_OK),
                       "Now the output is `3`, as expected. The solution works correctly."],
    # the program restated and run in the same turn: the run adds nothing
    "same_turn": ["Here is the solution:\n\n" + block(SUM_OK) + "\n\nLet me test it.\n" + call(SUM_OK),
                  "The output is `3`, which is correct."],
    # the run hard-codes the example instead of reading the input: judged as it ran
    "hard_coded": [OPENER + "Let me compute the example.\n" + call("a, b = 1, 2\nprint(a + b)\n", stdin=None),
                   "The result is `3`, which matches the expected output."],
    # a call without code never ran: nothing to submit in either mode
    "no_code": ['<tool_call>\n{"name": "python", "arguments": {"stdin": "1 2"}}\n</tool_call>',
                "I have verified the approach; the answer is the sum of the two numbers."],
}
# what each case submits: (restated, last_run), as (submitted, code)
EXPECTED = {
    "works": ((None, None), ("last_run", SUM_OK)),
    "restate": (("restated", SUM_OK), ("restated", SUM_OK)),
    "blocks": (("restated", SUM_OK), ("restated", SUM_OK)),
    "crash_fix": (("restated", SUM_OK), ("restated", SUM_OK)),
    "draft_then_fix": (("restated", WRONG), ("last_run", SUM_OK)),
    "same_turn": (("restated", SUM_OK), ("restated", SUM_OK)),
    "hard_coded": ((None, None), ("last_run", "a, b = 1, 2\nprint(a + b)\n")),
    "no_code": ((None, None), (None, None)),
}
VERDICTS = {  # (restated, last_run)
    "works": ("CE", "AC"), "restate": ("AC", "AC"), "blocks": ("AC", "AC"), "crash_fix": ("AC", "AC"),
    "draft_then_fix": ("WA", "AC"), "same_turn": ("AC", "AC"), "hard_coded": ("CE", "WA"), "no_code": ("CE", "CE"),
}


def problems() -> list[Problem]:
    tests = (make_test("1 2\n", "3\n", public=True), make_test("10 20\n", "30\n"), make_test("100 200\n", "300\n"))
    return [Problem(case, "toy", "easy", f"[{case}] Read two integers and print their sum.", "stdin", tests)
            for case in SCRIPTS]


class Replay:
    """Stands in for the model: each case's next turn, continuing the conversation the template rendered."""
    context_length = 100_000

    def __init__(self):
        self.prompts = []

    def count_tokens(self, text):
        return len(text) // 4

    def generate(self, prompts, seeds, max_new_tokens, temperature, top_p, stop=()):
        self.prompts += prompts
        out = []
        for prompt in prompts:
            case = next(c for c in SCRIPTS if f"[{c}]" in prompt)
            turn = prompt.count("<|im_start|>assistant") - 1  # assistant turns already in the conversation
            text = SCRIPTS[case][turn]
            out.append(Completion(text, len(text) // 4 + 1, "stop"))
        return out


@pytest.fixture(scope="module")
def qwen():
    """A tokenizer with TRL's Qwen2.5 chat template and its response parser."""
    tok = train_tokenizer(["def f(x): return x", "print('hello world')"] * 3, 300)
    tok.chat_template = qwen2_5_chat_template
    return add_response_parser(tok)


def sample(qwen, sandbox, submit: str):
    cfg = sample_settings(n=1, max_new_tokens=512, max_total_tokens=4096,
                          tools={"max_tool_calls": 3, "submit": submit})
    setting = setting_class("tools")(cfg, qwen, sandbox, workers=2)
    samples = [setting.start(p, 0) for p in problems()]
    backend = Replay()
    setting.run(samples, backend)
    return {s.problem.id: s for s in samples}, backend, cfg


@pytest.mark.parametrize("mode", [0, 1], ids=["restated", "last_run"])
def test_what_a_tools_sample_submits(qwen, sandbox, mode):
    submit = ("restated", "last_run")[mode]
    samples, backend, cfg = sample(qwen, sandbox, submit)
    assert '"name": "python"' in backend.prompts[0] and "<tools>" in backend.prompts[0]  # tools= rendered
    for case, s in samples.items():
        assert (s.submitted, s.code) == EXPECTED[case][mode], case
        assert s.turn_codes == [s.code] and s.done and s.turns == len(SCRIPTS[case])
    # the calls went through the parser and the sandbox, and the template rendered them back
    works = samples["works"]
    assert works.tool_outcomes == ["ok"] and [m["content"] for m in works.messages if m["role"] == "tool"] == ["3"]
    (ran,) = [m for m in works.messages if m.get("tool_calls")]
    assert ran["tool_calls"][0]["function"]["arguments"] == {"code": SUM_OK, "stdin": "1 2\n"}
    assert "<tool_response>\n3\n</tool_response>" in works.completion and "The solution works." in works.completion
    assert samples["crash_fix"].tool_outcomes == ["RE"]
    assert samples["draft_then_fix"].tool_outcomes == ["ok", "ok"]
    assert samples["no_code"].tool_outcomes == ["invalid"]
    assert cfg.params("tools")["tools"]["submit"] == submit  # the record says which mode made it
    rec = record(works, {"setting": "tools"})
    assert set(rec) <= set(RECORD_FIELDS) and rec["submitted"] == EXPECTED["works"][mode][0]


def test_no_answer_is_its_own_ce_through_evaluate_and_behaviour(qwen, sandbox, tmp_path, capsys):
    """restated vs last_run on the same transcripts: every verdict as expected, CE split by `ce_kind`, and
    behaviour.csv's no_answer_share beside the CE share."""
    write_problems(problems(), tmp_path / "problems.jsonl")
    evals = []
    for alpha, submit in ((0.0, "restated"), (1.0, "last_run")):
        samples, _, cfg = sample(qwen, sandbox, submit)
        expect = {"setting": "tools", "model": "replay", "backend": "replay", "params": cfg.params("tools")}
        write_jsonl(tmp_path / f"{submit}.jsonl", [record(samples[p.id], expect) for p in problems()])
        assert main(["evaluate", "--problems", str(tmp_path / "problems.jsonl"), "--samples",
                     str(tmp_path / f"{submit}.jsonl"), "--out", str(tmp_path / f"{submit}.parquet"),
                     "--workers", "2", "--time-factor", "1.0"]) == 0, capsys.readouterr().err
        evals.append(f"alpha={alpha}:{tmp_path / f'{submit}.parquet'}")
    restated = pq.read_table(tmp_path / "restated.parquet").to_pandas().set_index("problem_id")
    last_run = pq.read_table(tmp_path / "last_run.parquet").to_pandas().set_index("problem_id")
    for case, (v_restated, v_last_run) in VERDICTS.items():
        assert (restated.verdict[case], last_run.verdict[case]) == (v_restated, v_last_run), case
    for mode, df in enumerate((restated, last_run)):  # every CE here is a sample with no program
        assert df.ce_kind.fillna("-").to_dict() == {c: "no_answer" if v[mode] == "CE" else "-"
                                                    for c, v in VERDICTS.items()}
    assert last_run.submitted["works"] == "last_run" and pd.isna(restated.submitted["works"])  # carried

    out = tmp_path / "frontier"
    assert main(["frontier", "--evals", *evals, "--problems", str(tmp_path / "problems.jsonl"), "--k", "1",
                 "--budget", "2", "--bootstrap", "0", "--formats", "--out-dir", str(out)]) == 0, capsys.readouterr().err
    behaviour = pd.read_csv(out / "behaviour.csv").set_index("alpha")
    n = len(SCRIPTS)
    assert behaviour.loc[0.0, "ce_share"] == pytest.approx(3 / n)
    assert behaviour.loc[0.0, "no_answer_share"] == pytest.approx(3 / n)  # all of its CE: no program
    assert behaviour.loc[0.0, "last_run_share"] == 0
    assert behaviour.loc[1.0, "no_answer_share"] == pytest.approx(1 / n)  # the call that never ran
    assert behaviour.loc[1.0, "last_run_share"] == pytest.approx(3 / n)
    front = pd.read_csv(out / "frontier.csv").set_index("alpha")
    # the verdict stays CE: counts are what they were before ce_kind
    assert front.loc[0.0, "correctness_failure_rate"] == pytest.approx((3 + 1) / n)  # 3 CE + draft_then_fix's WA
    assert front.loc[1.0, "correctness_failure_rate"] == pytest.approx((1 + 1) / n)  # no_code's CE + hard_coded's WA


def test_a_program_that_does_not_compile_is_a_compile_ce(tmp_path, capsys):
    write_problems(problems()[:1], tmp_path / "problems.jsonl")
    write_jsonl(tmp_path / "s.jsonl", [
        {"problem_id": "works", "sample_id": 0, "code": "print(1 +\n"},  # a syntax error
        {"problem_id": "works", "sample_id": 1, "code": None},  # the setting found no answer
        {"problem_id": "works", "sample_id": 2, "completion": "I cannot solve this."},  # external: nothing to extract
        {"problem_id": "works", "sample_id": 3, "code": SUM_OK},
        {"problem_id": "works", "sample_id": 4, "code": WRONG},
    ])
    assert main(["evaluate", "--problems", str(tmp_path / "problems.jsonl"), "--samples", str(tmp_path / "s.jsonl"),
                 "--out", str(tmp_path / "e.parquet"), "--workers", "2", "--time-factor", "1.0"]) == 0, \
        capsys.readouterr().err
    table = pq.read_table(tmp_path / "e.parquet")
    assert table.column("verdict").to_pylist() == ["CE", "CE", "CE", "AC", "WA"]
    assert table.column("ce_kind").to_pylist() == ["compile", "no_answer", "no_answer", None, None]
    row = behaviour_table([0.0], [tmp_path / "e.parquet"]).iloc[0]
    assert row.ce_share == pytest.approx(3 / 5) and row.no_answer_share == pytest.approx(2 / 5)
    assert np.isnan(row.last_run_share)  # an external samples file says nothing of how it submitted


def test_behaviour_of_evaluations_without_the_new_columns_is_unknown_not_zero(tmp_path):
    """Files written before ce_kind and submitted still load: those shares are NaN, the rest as before."""
    old = tmp_path / "old.parquet"
    pq.write_table(pa.table({"problem_id": ["p", "p", "q", "q"], "sample_id": [0, 1, 0, 1],
                             "verdict": ["AC", "CE", "CE", "WA"], "first_verdict": ["AC", "CE", "CE", "WA"],
                             "tool_calls": [1, 1, 0, 2], "tool_outcomes": [["ok"], ["ok"], [], ["RE", "ok"]]}), old)
    new = tmp_path / "new.parquet"
    pq.write_table(pa.table({"problem_id": ["p", "p", "q", "q"], "sample_id": [0, 1, 0, 1],
                             "verdict": ["AC", "CE", "CE", "WA"], "ce_kind": [None, "no_answer", "compile", None],
                             "submitted": ["last_run", None, "restated", "restated"]}), new)
    table = behaviour_table([0.0, 1.0], [old, new])
    assert list(table.columns) == list(COLUMNS)
    assert list(table.ce_share) == [0.5, 0.5]
    assert np.isnan(table.no_answer_share[0]) and np.isnan(table.last_run_share[0])
    assert table.no_answer_share[1] == 0.25 and table.last_run_share[1] == 0.25
    assert table.tool_ran_share[0] == 0.75
