"""Sampling: hf backend (seeded, reproducible, stop strings), the three settings through the real
sandbox (tool calls executed, agentic feedback from public tests only), resume, bad input, and the
vLLM backend through .venv-vllm (marked `vllm`)."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from helpers import PICO_ONE_HEAD

from ewa.cli import main
from ewa.init.tiny import build_tiny_model, train_tokenizer
from ewa.problems import Problem, make_test, write_problems
from ewa.sample.backends import Completion, make_backend, resolve_backend
from ewa.sample.backends.vllm import vllm_python
from ewa.chat import load_tokenizer, render
from ewa.sample.config import SampleConfig
from ewa.sample.records import partial_path
from ewa.sample.run import provenance_path, sample_file
from ewa.sample.settings import setting_class

TEXTS = ["def f(x):\n    return x + 1\n", "print(sum(map(int, input().split())))\n",
         "```python\nprint(input())\n```\n", "<tool: python>\nprint(6 * 7)\n</tool>\n<output>\n42\n</output>\n",
         "Read two integers and print their sum.", "Your program passed 1 of 2 public tests."] * 10
# The config's sandbox section for sample_file: bwrap with nominal time limits (as the `sandbox` fixture).
SANDBOX = {"backend": "bwrap", "calibrate": False}
HIDDEN = ("HIDDEN_IN_7731", "HIDDEN_OUT_7731", "HIDDEN_OUT_9917")


@pytest.fixture(scope="session")
def pico(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("pico") / "model"
    tokenizer = train_tokenizer(TEXTS, 400)
    build_tiny_model(tokenizer, PICO_ONE_HEAD, seed=0).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def problems() -> list[Problem]:
    # Hidden tests come first and carry markers: judging them by mistake would put them in feedback.
    add = (make_test(f"{HIDDEN[0]} 2\n", f"{HIDDEN[1]}\n"), make_test("1 2\n", "3\n", public=True),
           make_test("2 2\n", "4\n", public=True), make_test("40 2\n", f"{HIDDEN[2]}\n"))
    return [
        Problem("add", "toy", "easy", "Read two integers and print their sum.", "stdin", add),
        Problem("echo", "toy", "easy", "Print the input line.", "stdin",
                (make_test("a\n", "a\n", public=True), make_test("b\n", "b\n"))),
        Problem("sq", "toy", "easy", "Implement sq(x) returning x*x.", "functional",
                (make_test("2", "4", public=True), make_test("3", "9")), func_name="sq"),
    ]


@pytest.fixture
def problems_file(tmp_path) -> str:
    path = tmp_path / "problems.jsonl"
    write_problems(problems(), path)
    return str(path)


def config(**kw) -> SampleConfig:
    return SampleConfig.from_dict({"n": 2, "max_new_tokens": 12, "temperature": 1.0, "batch_size": 4,
                                   "backend": "hf", **kw})


def read(path) -> list[dict]:
    return [json.loads(line) for line in open(path)]


class Recording:
    """The real backend, plus a log of every prompt it was given."""

    def __init__(self, backend):
        self.backend, self.prompts, self.stops = backend, [], []
        self.context_length = backend.context_length

    def count_tokens(self, text):
        return self.backend.count_tokens(text)

    def generate(self, prompts, seeds, max_new_tokens, temperature, top_p, stop=()):
        self.prompts += prompts
        self.stops.append(list(stop))
        return self.backend.generate(prompts, seeds, max_new_tokens, temperature, top_p, stop)


def run_setting(name, cfg, model, problem_list, backend, sandbox=None):
    setting = setting_class(name)(cfg, load_tokenizer(model), sandbox, workers=2)
    samples = [setting.start(p, i) for p in problem_list for i in range(cfg.n)]
    setting.run(samples, backend)
    return samples


# --- backend ---------------------------------------------------------------------------------------

def test_auto_backend_is_hf_without_a_gpu():
    assert resolve_backend("auto") == "hf"


def test_hf_sample_depends_only_on_its_seed(pico):
    tok = load_tokenizer(pico)
    backend = make_backend("hf", pico, tok, config())
    a = render(tok, [{"role": "user", "content": "print the sum"}])
    alone = backend.generate([a], [11], 16, 1.0, 0.95)
    together = backend.generate([a, a, a], [5, 11, 12], 16, 1.0, 0.95)  # no padding in play
    assert together[1] == alone[0]  # same seed, same text, whatever the batch mates
    assert together[2].text != together[1].text  # another seed samples something else


def test_hf_stop_string_ends_the_completion(pico):
    tok = load_tokenizer(pico)
    backend = make_backend("hf", pico, tok, config())
    prompt = render(tok, [{"role": "user", "content": "print the sum"}])
    full = backend.generate([prompt], [7], 24, 1.0, 1.0)[0]  # a seeded sample: the text is fixed
    text = full.text
    at = next(i for i in range(4, len(text) - 2) if text.find(text[i:i + 2]) == i and "\ufffd" not in text[i:i + 2])
    stop = text[at:at + 2]  # first seen mid-completion
    cut = backend.generate([prompt], [7], 24, 1.0, 1.0, stop=[stop])[0]
    assert (cut.text, cut.finish_reason) == (text[:at + 2], "stop")
    assert cut.token_count < full.token_count


# --- settings ----------------------------------------------------------------------------------------

def test_cli_reasoning_writes_records_and_provenance(pico, problems_file, tmp_path):
    out = tmp_path / "samples" / "reasoning.jsonl"
    settings = {"n": 2, "max_new_tokens": 8, "backend": "hf", "batch_size": 4,
                "assistant_prefix": "```python\nprint(input())\n```\n", "settings": ["reasoning"]}
    assert main(["sample", "--model", pico, "--problems", problems_file, "--setting", "reasoning",
                 "--config", json.dumps({"sample": settings, "seed": 3}), "--out", str(out), "--max-k", "2"]) == 0
    records = read(out)
    assert [(r["problem_id"], r["sample_id"]) for r in records] == [(p, i) for p in ("add", "echo", "sq") for i in (0, 1)]
    for r in records:
        assert r["code"] == "print(input())\n" and r["completion"].startswith(settings["assistant_prefix"])
        assert 1 <= r["tokens_generated"] <= 8 and r["turns"] == 1 and r["tool_calls"] == 0
        assert (r["setting"], r["model"], r["backend"]) == ("reasoning", pico, "hf")
        assert r["params"]["seed"] == 3 and r["params"]["n"] == 2
    assert len({r["seed"] for r in records}) == len(records)
    meta = json.loads(provenance_path(out).read_text())
    assert meta["config"]["n"] == 2 and meta["setting"] == "reasoning" and "torch" in meta["versions"]
    assert not partial_path(out).exists()


def test_hf_sampling_is_reproducible_for_a_seed(pico, problems_file, tmp_path):
    cfg = config(n=3)
    runs = [read(sample_file(problems()[:2], "reasoning", cfg, pico, tmp_path / f"{i}.jsonl", progress=False))
            for i in range(2)]
    assert runs[0] == runs[1]
    assert len({r["completion"] for r in runs[0]}) == len(runs[0])  # samples differ from each other
    other = read(sample_file(problems()[:2], "reasoning", config(n=3, seed=1), pico, tmp_path / "s1.jsonl",
                             progress=False))
    assert [r["completion"] for r in other] != [r["completion"] for r in runs[0]]


def test_tools_loop_executes_calls_in_the_sandbox(sandbox):
    """The protocol alone, driven by a scripted generator (the model cannot be made to call a tool)."""
    script = {  # per problem: the completions its generate calls return, in order
        "add": ["Let me check.\n<tool: python>\nprint(sum(range(10)))\n</tool>",
                "So 45.\n<tool: python>\nwhile True:\n    pass\n</tool>",
                "Done.\n```python\nprint(45)\n```"],
        "echo": ["<tool: python>\n```python\nprint('fenced')\n```\n</tool>",
                 "<tool: python>\nimport sys; print('x', file=sys.stderr); 1/0\n</tool>",
                 "Again <tool: python>\nprint('over the limit')\n</tool> and\n```python\nprint(input())\n```"],
    }

    class Scripted:
        context_length = 10_000

        def __init__(self):
            self.stops = []

        def count_tokens(self, text):
            return len(text) // 4

        def generate(self, prompts, seeds, max_new_tokens, temperature, top_p, stop=()):
            self.stops.append(list(stop))
            out = []
            for prompt in prompts:
                pid = "add" if "two integers" in prompt else "echo"
                assert prompt.startswith("System: ")  # plain-text fallback
                text = script[pid][prompt.count("<output>") - 1]  # the system text shows one <output>
                hit = next((text.find(s) + len(s) for s in stop if s in text), None)
                out.append(Completion(text[:hit], 5, "stop") if hit else Completion(text, 5, "stop"))
            return out

    cfg = SampleConfig.from_dict({"n": 1, "tools": {"max_tool_calls": 2, "time_limit_s": 0.5}})

    class NoTemplate:  # a base model's tokenizer: prompts use the plain-text fallback
        chat_template = None

    backend = Scripted()
    setting = setting_class("tools")(cfg, NoTemplate(), sandbox, workers=2)
    samples = [setting.start(p, 0) for p in problems()[:2]]
    setting.run(samples, backend)
    add, echo = samples
    assert "<tool: python>\nprint(sum(range(10)))\n</tool>\n<output>\n45\n</output>\n" in add.completion
    assert "(stopped: took longer than 0.5 s)" in add.completion
    assert add.tool_calls == 2 and add.code == "print(45)\n" and add.completion.endswith("```")
    assert "<output>\nfenced\n</output>" in echo.completion
    assert "ZeroDivisionError: division by zero\n</output>" in echo.completion
    # the third call came after the limit: plain text, never run; the submission is outside the tags
    assert echo.tool_calls == 2 and "over the limit\n</output>" not in echo.completion
    assert echo.code == "print(input())\n"
    assert [] in backend.stops and ["</tool>"] in backend.stops


def test_tools_through_hf_backend_runs_a_forced_call(pico, sandbox):
    cfg = config(assistant_prefix="<tool: python>\nprint(6 * 7)\n</tool>", tools={"max_tool_calls": 1})
    backend = make_backend("hf", pico, load_tokenizer(pico), cfg)
    samples = run_setting("tools", cfg, pico, problems()[:1], backend, sandbox)
    for s in samples:
        assert s.completion.startswith("<tool: python>\nprint(6 * 7)\n</tool>\n<output>\n42\n</output>\n")
        assert s.tool_calls == 1 and s.tokens_generated > 0  # generation continued after the output
        assert len(s.completion) > len("<tool: python>\nprint(6 * 7)\n</tool>\n<output>\n42\n</output>\n")


def test_agentic_feedback_uses_public_tests_only(pico, sandbox):
    cfg = config(assistant_prefix="```python\nprint(input())\n```\n", agentic={"max_turns": 3})
    backend = Recording(make_backend("hf", pico, load_tokenizer(pico), cfg))
    samples = run_setting("agentic", cfg, pico, problems()[:2], backend, sandbox)
    add, echo = samples[0], samples[2]
    # echo passes its public test at once; add fails public test 1 every turn until max_turns
    assert echo.turns == 1 and echo.done and echo.code == "print(input())\n"
    assert add.turns == 3 and add.code == "print(input())\n"
    notes = [m["content"] for m in add.messages if m["role"] == "user"][1:]
    assert len(notes) == 2
    assert "passed 0 of 2 public tests" in notes[0] and "On public test 1 it gave a wrong answer" in notes[0]
    assert "Input:\n1 2\n\nExpected output:\n3\n\n" in notes[0] and "Your output:\n1 2" in notes[0]
    assert notes[0] in add.completion
    seen = backend.prompts + [s.completion for s in samples] + [m["content"] for s in samples for m in s.messages]
    for marker in HIDDEN:
        assert not any(marker in text for text in seen), marker


def test_resume_keeps_finished_problems_and_continues(pico, tmp_path):
    cfg, probs = config(), problems()
    reference = read(sample_file(probs, "reasoning", cfg, pico, tmp_path / "ref.jsonl", progress=False))
    out = tmp_path / "run.jsonl"
    # The killed run finished its first chunk (add, echo) and was writing sq's records.
    kept = [dict(r, completion="KEPT FROM THE KILLED RUN") for r in reference[:4]]
    stale = dict(reference[4], params={**reference[4]["params"], "temperature": 0.1})  # other settings
    with open(partial_path(out), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in kept + [stale, reference[4]])  # sq: one of two samples
        f.write(json.dumps(reference[5])[:40])  # the kill cut this line
    records = read(sample_file(probs, "reasoning", cfg, pico, out, progress=False))
    assert records[:4] == kept  # not regenerated
    assert records[4:] == reference[4:]  # regenerated exactly as in the uninterrupted run
    assert not partial_path(out).exists()


# --- bad input -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, needle", [
    ({"setting": "chat"}, "unknown setting 'chat'"),
    ({"sample": {"backend": "tgi"}}, "key 'sample.backend': expected one of"),
    ({"sample": {"n": 2}, "max_k": "8"}, "sample.n=2 is smaller than the largest k (8)"),
    ({"sample": {"tools": {"max_calls": 1}}}, "unknown key 'sample.tools.max_calls'"),
    ({"sample": {"temperature": "hot"}}, "key 'sample.temperature': expected number"),
    ({"config": "{not json"}, "--config: not valid JSON"),
    ({"model": "no-tokenizer"}, "no tokenizer"),
])
def test_bad_input_is_one_clear_line(pico, problems_file, tmp_path, capsys, change, needle):
    model = pico
    if change.get("model") == "no-tokenizer":
        model = str(tmp_path / "bare")
        shutil.copytree(pico, model)
        for name in os.listdir(model):
            if name.startswith("tokenizer") or name.endswith(".jinja"):
                os.remove(os.path.join(model, name))
    config = change.get("config") or json.dumps({"sample": change.get("sample", {"n": 2})})
    argv = ["sample", "--model", model, "--problems", problems_file, "--setting", change.get("setting", "reasoning"),
            "--config", config, "--out", str(tmp_path / "out.jsonl"), "--max-k", change.get("max_k", "1")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out.jsonl").exists()


# --- vLLM ----------------------------------------------------------------------------------------------

@pytest.mark.vllm
@pytest.mark.skipif(vllm_python() is None, reason="no vLLM venv (.venv-vllm): run scripts/setup-vllm.sh")
def test_vllm_backend_samples_tools_through_the_worker(pico, tmp_path, monkeypatch):
    monkeypatch.setenv("EWA_CACHE_DIR", str(tmp_path / "cache"))
    cfg = config(backend="vllm", assistant_prefix="<tool: python>\nprint(6 * 7)\n</tool>", tools={"max_tool_calls": 1})
    out = sample_file(problems()[:2], "tools", cfg, pico, tmp_path / "tools.jsonl", sandbox=SANDBOX, workers=2,
                      progress=False)
    records = read(out)
    assert len(records) == 4 and {r["backend"] for r in records} == {"vllm"}
    for r in records:
        assert r["completion"].startswith("<tool: python>\nprint(6 * 7)\n</tool>\n<output>\n42\n</output>\n")
        assert r["tool_calls"] == 1 and 1 <= r["tokens_generated"] <= 12
    assert len({r["completion"] for r in records}) == 4  # per-sample seeds
    meta = json.loads(provenance_path(out).read_text())
    assert meta["backend"] == "vllm" and meta["backend_info"]["vllm"] and "worker" in meta["backend_info"]["where"]
