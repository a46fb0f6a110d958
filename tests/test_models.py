"""The shared init: tiny tokenizer (ids agree with transformers' reload; Qwen2.5's chat template),
SFT traces of all three settings (their programs run in the real sandbox), `ewa init` (loadable,
deterministic, SFT learns), adopting a local HF directory, and bad-input errors."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import unicodedata
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer

from helpers import PICO

from ewa.cli import main
from ewa.chat import PYTHON_TOOL, parse_turn, supports_tools, add_response_parser
from ewa.config import section
from ewa.init.mutants import input_slips, mutants, syntax_slips
from ewa.init.traces import sft_examples
from ewa.init.tiny import CHAT_TEMPLATE, ENDOFTEXT, IM_END, IM_START, build_tiny_model, train_tokenizer
from ewa.sandbox import sandbox_from_config
from ewa.sandbox.extract import extract_code
from ewa.problems import Problem, make_test, write_problems
from ewa.prompts import SYSTEM_PROMPT, TOOLS_SYSTEM, agentic_messages, reasoning_messages, tools_messages

SAMPLES = [
    "def f(x):\n    return x ** 2  # café, naïve, 日本語 😀\n",
    "n = int(input())\n\tprint(sum(range(n)))\r\n\n\n   \n",
    "x=12345678901234567890;y='  spaces  '\nprint(x,y)",
    "e\u0301 composed vs \u00e9 precomposed",  # NFC makes these the same ids
    "if a<=b and c!=d: pass\n    # trailing    \n",
]


def problem(pid: str) -> Problem:
    tests = tuple(make_test(f"{n}\n{' '.join(['1'] * n)}\n", str(n), public=n == 1) for n in (1, 2, 5, 50))
    return Problem(id=pid, source="toy", difficulty="easy", statement=f"({pid}) Read n and n numbers; print their sum.",
                   testtype="stdin", tests=tests, meta={"solutions": {
                       "brute": "n = int(input())\nt = 0\nfor v in input().split():\n    t += int(v)\nprint(t)",
                       "efficient": "input()\nprint(sum(map(int, input().split())))",
                       "wrong": ["input()\nprint(len(input()))", "print(0)"]}})


@pytest.fixture(scope="session")
def problems_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("problems") / "train.jsonl"
    write_problems([problem("toy/a"), problem("toy/b")], path)
    return path


def init_config(seed=0, steps=3):
    """`ewa init --config`: the tiny init of a pico model, briefly SFT'd."""
    return json.dumps({"seed": seed, "model": {"init": "tiny", "tiny": PICO, "sft": {
        "steps": steps, "batch_size": 4, "learning_rate": 3e-3, "logging_steps": 1}}})


@pytest.fixture(scope="session")
def tiny_inits(tmp_path_factory, problems_file):
    """Two `ewa init` runs with the same seed and thread count, one with another seed, and one with the
    first seed on two threads (make science builds a report's inits on one thread each, the demo on two)."""
    root = tmp_path_factory.mktemp("inits")
    out = {}
    for name, seed, threads in (("a", 0, 1), ("b", 0, 1), ("c", 1, 1), ("two_threads", 0, 2)):
        rc = main(["init", "--config", init_config(seed), "--problems", str(problems_file),
                   "--threads", str(threads), "--out", str(root / name)])
        assert rc == 0
        out[name] = root / name
    return out


def test_tokenizer_ids_agree_with_reloads(tmp_path):
    corpus = SAMPLES * 3 + [problem("toy/a").statement]
    tok = train_tokenizer(corpus, 400)
    model = build_tiny_model(tok, PICO, seed=0)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    auto = AutoTokenizer.from_pretrained(tmp_path)  # transformers rebuilds a Qwen2Tokenizer for qwen2
    raw = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))  # what tokenizer.json alone says
    assert type(auto).__name__ == "Qwen2Tokenizer"
    for text in SAMPLES:
        ids = tok(text).input_ids
        assert auto(text).input_ids == ids == raw.encode(text).ids
        assert auto.decode(ids) == unicodedata.normalize("NFC", text)
    assert auto("e\u0301").input_ids == auto("\u00e9").input_ids
    assert auto.convert_tokens_to_ids([ENDOFTEXT, IM_START, IM_END]) == [0, 1, 2]
    assert (auto.eos_token, auto.pad_token) == (IM_END, ENDOFTEXT)
    assert model.config.vocab_size == len(auto)


def test_chat_template_is_qwen2_5_as_trl_ships_it(tmp_path):
    from trl.chat_template_utils import qwen2_5_chat_template

    tok = train_tokenizer(SAMPLES, 300)
    tok.save_pretrained(tmp_path)
    auto = AutoTokenizer.from_pretrained(tmp_path)
    assert auto.chat_template == CHAT_TEMPLATE == qwen2_5_chat_template
    # the tool-call tags are single, non-special tokens: decoding a generation keeps them
    for tag in ("<tool_call>", "</tool_call>"):
        ids = auto(tag, add_special_tokens=False).input_ids
        assert len(ids) == 1 and auto.decode(ids, skip_special_tokens=True) == tag
    add_response_parser(auto)
    assert supports_tools(auto)
    messages = reasoning_messages(problem("toy/a"))
    text = auto.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (f"<|im_start|>system\n{messages[0]['content']}<|im_end|>\n"
                    f"<|im_start|>user\n{messages[1]['content']}<|im_end|>\n<|im_start|>assistant\n")
    full = auto.apply_chat_template(messages + [{"role": "assistant", "content": "ok"}], tokenize=False)
    assert full.endswith("<|im_start|>assistant\nok<|im_end|>\n")
    assert "```python" in messages[0]["content"] and problem("toy/a").statement in messages[1]["content"]


def test_chat_format_strings_are_single_tokens_and_text_is_unchanged(tmp_path):
    """The template's boilerplate reads as one token each, and a program inside a tool call's JSON
    string splits like the same program in a code block (the escaped newline is its own token)."""
    program = problem("toy/a").meta["solutions"]["brute"]
    tok = train_tokenizer(SAMPLES + [program] * 3, 400)
    tok.save_pretrained(tmp_path)
    auto = add_response_parser(AutoTokenizer.from_pretrained(tmp_path))
    opening = tools_messages(problem("toy/a"))
    call = {"role": "assistant", "content": "Approach: brute force.", "tool_calls": [
        {"type": "function", "function": {"name": "python", "arguments": {"code": program, "stdin": "1\n1\n"}}}]}
    text = auto.apply_chat_template(opening + [call], tools=[PYTHON_TOOL], tokenize=False)
    ids = auto(text, add_special_tokens=False).input_ids
    assert auto.decode(ids) == text  # byte-identical round trip
    pieces = [auto.decode([i]) for i in ids]
    system = opening[0]["content"]  # the tools setting's whole system prompt, one token
    assert system.startswith(SYSTEM_PROMPT) and system.endswith(TOOLS_SYSTEM) and system in pieces
    block = pieces[pieces.index(system) + 1]  # the template's whole tools block, one token
    assert block.startswith("\n\n# Tools") and block.endswith("</tool_call>") and json.dumps(PYTHON_TOOL) in block
    assert '<tool_call>\n{"name": "python", "arguments": {"code": "' in pieces
    escaped = json.dumps(program)[1:-1]
    as_code = [auto.decode([i]) for i in auto(program, add_special_tokens=False).input_ids]
    in_json = [auto.decode([i]) for i in auto(escaped, add_special_tokens=False).input_ids]
    # every escaped newline is a token of its own (`\\nfor` no longer fuses into one piece), so the
    # program costs about as many tokens in the JSON string as in the code block
    assert all(p == "\\n" for p in in_json if "\\n" in p)
    assert len(in_json) <= len(as_code) + 2 * escaped.count("\\n")
    # the model's generated call still parses into the same call
    turn = parse_turn(auto, "", text[text.rindex("<|im_start|>assistant\n") + len("<|im_start|>assistant\n"):])
    assert turn.tool_calls and turn.tool_calls[0].arguments["code"] == program


def test_sft_examples_mix_brute_efficient_and_wrong():
    rows = sft_examples([problem("toy/a")], {"brute": 2, "efficient": 2, "wrong": 1, "tools": 1, "agentic": 1})
    for setting in ("reasoning", "agentic"):  # without a sandbox: no traces, but the agentic first turns
        kinds = [r["kind"] for r in rows if r["setting"] == setting]
        assert kinds.count("brute") == 2 and kinds.count("efficient") == 2 and kinds.count("wrong") == 2
    assert len(rows) == 12
    wrong = next(r for r in rows if r["kind"] == "wrong")["completion"][0]["content"]
    efficient = next(r for r in rows if r["kind"] == "efficient")["completion"][0]["content"]
    # a wrong attempt announces the same plan as a correct efficient one
    assert wrong.splitlines()[0] == efficient.splitlines()[0] == "Approach: efficient algorithm."
    assert efficient.endswith("\n```") and "```python\ninput()" in efficient


def plus_k(pid: str, k: int) -> Problem:
    """An instance of a toy family: print the sum of the numbers plus K. As in the mini set, K is the first
    input line, so sibling instances share their programs."""
    tests = tuple(make_test(f"{k}\n{n}\n{' '.join(['1'] * n)}\n", str(n + k), public=n <= 2) for n in (1, 2, 5, 50))
    return Problem(id=pid, source="toy", difficulty="easy",
                   statement=f"Print the sum of the numbers plus {k}. The input starts with an extra line: {k}.",
                   testtype="stdin", tests=tests, meta={"family": "plus", "solutions": {
                       "brute": "K=int(input())\nn=int(input())\na=input().split()\nt=K\n"
                                "for i in range(n):t+=int(a[i])\nprint(t)",
                       "efficient": "K=int(input())\ninput()\na=input().split()\nprint(K+sum(map(int,a)))",
                       "wrong": ["K=int(input())\nn=int(input())\nprint(n+K if n<3 else n)"]}})


@pytest.fixture(scope="module")
def sandbox():
    with sandbox_from_config(section("sandbox", {}), time_factor=1.0) as sb:
        yield sb


def test_tool_traces_run_the_candidate_on_the_first_public_input(sandbox):
    a, b = plus_k("plus/3", 3), plus_k("plus/7", 7)
    rows = [r for r in sft_examples([a, b], {"brute": 0, "efficient": 0, "wrong": 0, "tools": 1, "agentic": 0},
                                    sandbox) if r["problem_id"] == a.id]
    runs = [r for r in rows if len(r["completion"]) == 3]
    assert [r["kind"] for r in runs] == ["brute", "efficient", "wrong"]
    for r in runs:
        call, output, answer = r["completion"]
        args = call["tool_calls"][0]["function"]["arguments"]
        sources = {**a.meta["solutions"], "wrong": a.meta["solutions"]["wrong"][0]}
        assert args["code"] == sources[r["kind"]]
        assert args["stdin"] == a.public_tests[0][1].input
        assert output == {"role": "tool", "name": "python", "content": "4"}  # 1 + 3, really run
        assert extract_code(answer["content"]).strip() == args["code"].strip()
        assert json.loads(r["tools"]) == [PYTHON_TOOL]


def test_tool_recovery_traces_answer_correctly_after_a_real_crash(sandbox):
    a, b = plus_k("plus/3", 3), plus_k("plus/7", 7)
    rows = [r for r in sft_examples([a, b], {"brute": 0, "efficient": 0, "wrong": 0, "tools": 1, "agentic": 0},
                                    sandbox) if r["problem_id"] == a.id and len(r["completion"]) == 1]
    # per correct program: a syntax slip, and the program itself on a misread input; wrong programs get none
    assert [r["kind"] for r in rows] == ["brute", "brute", "efficient", "efficient"]
    public = a.public_tests[0][1].input  # "3\n1\n1\n"
    for r, error in zip(rows, ("SyntaxError", "IndexError", "SyntaxError", "ValueError")):
        call, output = r["prompt"][-2:]
        args = call["tool_calls"][0]["function"]["arguments"]
        assert output["role"] == "tool" and error in output["content"]  # really run
        reference = a.meta["solutions"][r["kind"]]
        if error == "SyntaxError":  # the program slipped: the answer fixes it
            assert args["code"] != reference and args["stdin"] == public
        else:  # the input was misread: the answer keeps the program that crashed
            assert args["code"] == reference and args["stdin"] != public
        (answer,) = r["completion"]  # only the answer after the crash is trained on
        assert extract_code(answer["content"]).strip() == reference.strip()
    # brute force indexes past a count one too large; the efficient sum only fails on a letter
    assert rows[1]["prompt"][-2]["tool_calls"][0]["function"]["arguments"]["stdin"] == "3\n2\n1\n"
    assert rows[3]["prompt"][-2]["tool_calls"][0]["function"]["arguments"]["stdin"] == "3\n1\na\n"


def test_input_slips_misread_counts_values_and_lines():
    assert list(input_slips("7\n3\n1 2 3\n")) == [
        "7\n4\n1 2 3\n", "8\n3\n1 2 3\n", "7\n3\n1 2\n", "7\n3\na 2 3\n", "7\n3\n"]
    assert list(input_slips("5\n")) == ["6\n", "\n", "a\n"]


def test_agentic_traces_fix_a_mutant_of_the_own_program_after_real_feedback(sandbox):
    a, b = plus_k("plus/3", 3), plus_k("plus/7", 7)  # siblings share programs: no sibling fails here
    rows = [r for r in sft_examples([a, b], {"brute": 0, "efficient": 0, "wrong": 0, "tools": 0, "agentic": 1},
                                    sandbox) if r["problem_id"] == a.id]
    # per kind: the first failing mutant (brute's already crashes; efficient's sum cannot), then a syntax slip
    assert [r["kind"] for r in rows] == ["brute", "brute", "efficient", "efficient"]
    brute, brute_slip, efficient, efficient_slip = rows
    for r, slip in ((brute, "range(n+1)"), (efficient, "K-sum("), (brute_slip, "int(a[i]\n"),
                    (efficient_slip, "map(int,a))\n")):
        first, note = r["prompt"][-2:]
        assert slip in first["content"] and first["role"] == "assistant"
        assert note["role"] == "user" and "Expected output:\n4" in note["content"]
        (fix,) = r["completion"]  # the only turn trained on
        assert extract_code(fix["content"]).strip() == a.meta["solutions"][r["kind"]].strip()
    # what the first attempts really did on the first public test (3 + 1 expected)
    assert "IndexError" in brute["prompt"][-1]["content"]  # range(n+1) reads past the numbers
    assert "Your output:\n2" in efficient["prompt"][-1]["content"]  # 3 - 1
    for r in (brute_slip, efficient_slip):
        assert "did not compile" in r["prompt"][-1]["content"] and "SyntaxError" in r["prompt"][-1]["content"]
    assert json.loads(rows[0]["tools"]) is None


def test_agentic_first_turns_are_trained_like_reasoning_answers_per_kind(sandbox):
    a = plus_k("plus/3", 3)
    mix = {"brute": 1, "efficient": 2, "wrong": 0, "tools": 0, "agentic": 1}
    rows = sft_examples([a], mix, sandbox)
    reasoning = [r for r in rows if r["setting"] == "reasoning"]
    first = [r for r in rows if r["setting"] == "agentic" and len(r["prompt"]) == 2]
    assert [r["kind"] for r in first] == [r["kind"] for r in reasoning] == ["brute", "efficient", "efficient"]
    for r, twin in zip(first, reasoning):
        assert r["prompt"] == agentic_messages(a) and r["completion"] == twin["completion"]
    assert not [r for r in sft_examples([a], {**mix, "agentic": 0}, sandbox) if r["setting"] == "agentic"]


def test_agentic_traces_start_from_a_wrong_variant_that_a_public_test_catches(sandbox):
    a = plus_k("plus/3", 3)
    caught = "K=int(input())\nn=int(input())\nprint(n+K if n<2 else n)"  # wrong from n=2: public test 2
    a = replace(a, meta={**a.meta, "solutions": {**a.meta["solutions"], "wrong": [caught]}})
    rows = [r for r in sft_examples([a], {"brute": 0, "efficient": 0, "wrong": 0, "tools": 0, "agentic": 1},
                                    sandbox) if r["kind"] == "efficient"]
    first, note = rows[0]["prompt"][-2:]
    assert extract_code(first["content"]).strip() == caught  # with the efficient plan line, as sampled
    assert "On public test 2" in note["content"] and "Your output:\n2" in note["content"]
    (fix,) = rows[0]["completion"]
    assert extract_code(fix["content"]).strip() == a.meta["solutions"]["efficient"].strip()


def test_mutants_are_deterministic_slips_that_keep_reading_the_input():
    src = "import sys\nK=int(input())\nn,*a=map(int,sys.stdin.read().split())\nb=0\n" \
          "for i in range(1,n):\n if a[i]<=K:b=max(b,a[i]+1)\nprint(b%7)\n"
    got = list(mutants(src))
    assert got == list(mutants(src)) and len({m for _, m in got}) == len(got)
    assert [name for name, _ in got][:3] == ["min/max", "range bound", "comparison"]
    assert got[1][1].split("\n")[4] == "for i in range(1,n+1):"
    for _, m in got:
        compile(m, "<mutant>", "exec")
        assert m != src and m.split("\n")[:3] == src.split("\n")[:3]  # the input is read as before


def test_syntax_slips_do_not_compile_and_keep_reading_the_input():
    src = "import sys\nK=int(input())\nn=int(input())\nfor i in range(n):\n    print(max(i, K))\n"
    got = list(syntax_slips(src))
    assert [name for name, _ in got] == ["colon dropped", "parenthesis dropped", "parenthesis dropped"]
    assert got[0][1].split("\n")[3] == "for i in range(n)"
    for _, slip in got:
        with pytest.raises(SyntaxError):
            compile(slip, "<slip>", "exec")
        assert slip.split("\n")[:3] == src.split("\n")[:3]


def test_traces_render_through_the_template_and_parse_back(sandbox, tmp_path):
    a, b = plus_k("plus/3", 3), plus_k("plus/7", 7)
    tok = train_tokenizer(SAMPLES, 400)
    add_response_parser(tok)
    row = next(r for r in sft_examples([a, b], {"brute": 0, "efficient": 0, "wrong": 0, "tools": 1, "agentic": 0},
                                       sandbox) if r["problem_id"] == a.id)
    tools = json.loads(row["tools"])
    prompt = tok.apply_chat_template(row["prompt"], tools=tools, tokenize=False, add_generation_prompt=True)
    full = tok.apply_chat_template(row["prompt"] + row["completion"][:1], tools=tools, tokenize=False)
    call = parse_turn(tok, prompt, full[len(prompt):])
    assert call.tool_calls[0].arguments == row["completion"][0]["tool_calls"][0]["function"]["arguments"]


def test_init_tiny_is_loadable(tiny_inits):
    path = tiny_inits["a"]
    record = json.loads((path / "ewa_init.json").read_text())
    assert record["sft_result"]["steps"] == 3 and record["versions"]["transformers"]
    assert record["config"]["tiny"]["hidden_size"] == 32
    model = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    assert model.config.model_type == "qwen2" and model.config.num_hidden_layers == 2
    ids = tok.apply_chat_template(reasoning_messages(problem("toy/a")), add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)
    out = model.generate(**ids, max_new_tokens=5, do_sample=False)
    assert out.shape[1] == ids["input_ids"].shape[1] + 5 or tok.eos_token_id in out[0].tolist()
    assert not any(p.name.startswith(".") for p in path.parent.iterdir())  # no temp dirs left behind
    assert tok.response_template  # saved with it: sample jobs load the tokenizer without importing TRL
    loads = "from ewa.chat import load_tokenizer, supports_tools; import sys; " \
            f"assert supports_tools(load_tokenizer({str(path)!r})); print('trl' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", loads], capture_output=True, text=True, check=True).stdout == "False\n"


def test_init_is_deterministic_given_the_seed(tiny_inits):
    a, b, c = (load_file(tiny_inits[k] / "model.safetensors") for k in "abc")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)  # another seed, other weights
    assert (tiny_inits["a"] / "tokenizer.json").read_text() == (tiny_inits["c"] / "tokenizer.json").read_text()


def test_another_thread_count_changes_the_init_by_rounding_only_and_is_recorded(tiny_inits):
    """Where torch's reductions round by thread count (AVX-512 builds), two threads may give other bytes than
    one: never more than float rounding, and the record says which thread count and instruction set made them."""
    a, two = (load_file(tiny_inits[k] / "model.safetensors") for k in ("a", "two_threads"))
    assert all(torch.allclose(a[k], two[k], rtol=1e-4, atol=1e-5) for k in a)
    records = [json.loads((tiny_inits[k] / "ewa_init.json").read_text())["compute"] for k in ("a", "two_threads")]
    assert [r["torch_threads"] for r in records] == [1, 2]
    assert records[0]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()


def test_sft_moves_the_model_toward_the_references(tmp_path, problems_file):
    """More SFT steps lower the loss on the reference solutions (the warm start learns)."""
    rc = main(["init", "--config", init_config(steps=30), "--problems", str(problems_file),
               "--out", str(tmp_path / "init")])
    assert rc == 0
    result = json.loads((tmp_path / "init" / "ewa_init.json").read_text())["sft_result"]
    assert result["steps"] == 30 and result["last_loss"] < result["first_loss"]


def test_init_adopts_a_local_hf_directory(tiny_inits, tmp_path, problems_file):
    no_sft = json.dumps({"model": {"sft": {"steps": 0}}})  # the schema's SFT default is for the tiny model
    rc = main(["init", "--init", str(tiny_inits["a"]), "--config", no_sft, "--problems", str(problems_file),
               "--out", str(tmp_path / "init")])
    assert rc == 0
    src, dst = load_file(tiny_inits["a"] / "model.safetensors"), load_file(tmp_path / "init" / "model.safetensors")
    assert all(torch.equal(src[k], dst[k]) for k in src)
    assert json.loads((tmp_path / "init" / "ewa_init.json").read_text())["source"] == str(tiny_inits["a"].resolve())


def test_init_fine_tunes_a_local_hf_directory_when_asked(tiny_inits, tmp_path, problems_file):
    config = json.dumps({"model": {"sft": {"steps": 2, "batch_size": 2, "learning_rate": 1e-2}}})
    rc = main(["init", "--init", str(tiny_inits["a"]), "--config", config, "--problems", str(problems_file),
               "--out", str(tmp_path / "init")])
    assert rc == 0
    src, dst = load_file(tiny_inits["a"] / "model.safetensors"), load_file(tmp_path / "init" / "model.safetensors")
    assert any(not torch.equal(src[k], dst[k]) for k in src)
    assert json.loads((tmp_path / "init" / "ewa_init.json").read_text())["sft_result"]["steps"] == 2


def test_a_bf16_model_directory_learns_a_warm_start_at_a_real_learning_rate(tiny_inits, tmp_path, problems_file):
    """A published model stores bf16. At a warm start's learning rate (1e-5) each AdamW update is far below half
    a bf16 step: trained and saved in bf16, almost no weight would move. The warm start trains and saves float32."""
    source = tmp_path / "bf16"
    shutil.copytree(tiny_inits["a"], source)
    AutoModelForCausalLM.from_pretrained(source, dtype=torch.bfloat16).save_pretrained(source)
    given = load_file(source / "model.safetensors")
    assert {t.dtype for t in given.values()} == {torch.bfloat16}
    config = json.dumps({"model": {"sft": {"steps": 2, "batch_size": 2, "learning_rate": 1e-5}}})
    rc = main(["init", "--init", str(source), "--config", config, "--problems", str(problems_file),
               "--out", str(tmp_path / "init")])
    assert rc == 0
    trained = load_file(tmp_path / "init" / "model.safetensors")
    assert {t.dtype for t in trained.values()} == {torch.float32}
    matrices = [k for k, t in given.items() if t.dim() == 2 and "embed" not in k]  # every row gets a gradient
    moved = sum(int((trained[k] != given[k].float()).sum()) for k in matrices)
    assert moved > 0.9 * sum(given[k].numel() for k in matrices)


@pytest.mark.parametrize("breakage, needle", [
    ("missing", "is not a directory"),
    ("config.json", "config.json is missing"),
    ("model.safetensors", "has no weights"),
    ("tokenizer.json", "has no tokenizer"),
    ("bad-config", "config.json is not valid JSON"),
])
def test_bad_init_directory_is_one_clear_line(tiny_inits, tmp_path, problems_file, capsys, breakage, needle):
    broken = tmp_path / "broken"
    if breakage != "missing":
        shutil.copytree(tiny_inits["a"], broken)
        if breakage == "bad-config":
            (broken / "config.json").write_text("{not json")
        else:
            (broken / breakage).unlink()
    rc = main(["init", "--init", str(broken), "--problems", str(problems_file), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and needle in err and len(err.splitlines()) == 1 and "--init" in err
    assert not (tmp_path / "out").exists()


def test_unknown_tiny_setting_is_named(tmp_path, problems_file, capsys):
    rc = main(["init", "--config", json.dumps({"model": {"tiny": {"hidden": 3}}}), "--problems", str(problems_file),
               "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "'model.tiny.hidden'" in err and not (tmp_path / "out").exists()
