"""Inference settings, registered by the name the config uses: each drives the conversations of a
batch of samples through a backend (and, for tools/agentic, the sandbox) until every one is done.
"""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from ewa.problems import Problem
from ewa.chat import render
from ewa.sample.config import SampleConfig
from ewa.sample.records import derive_seed, sample_seed

SETTINGS = {
    "reasoning": "ewa.sample.settings.reasoning:Reasoning",
    "tools": "ewa.sample.settings.tools:Tools",
    "agentic": "ewa.sample.settings.agentic:Agentic",
}


@dataclass
class Sample:
    """One sample's conversation in progress, and what its record will say."""
    problem: Problem
    sample_id: int
    seed: int  # derived from the base seed, the problem id and sample_id; each call derives from it
    messages: list[dict]
    assistant: str = ""  # the start of the assistant turn being written (the configured prefix)
    prompt: str = ""  # the rendered conversation the last generate call continued
    completion: str = ""  # the transcript after the opening messages, once done
    code: str | None = None
    # where `code` came from: "answer" (an answer's last python block: reasoning, agentic), "restated" (tools:
    # the last block written outside tool calls), "last_run" (tools: the last program the tool ran); None: no code
    submitted: str | None = None
    turn_codes: list = field(default_factory=list)  # every submitted program, one per answer turn
    tool_outcomes: list = field(default_factory=list)  # per tool call: the sandbox status, or why it did not run
    tokens_generated: int = 0
    turns: int = 0
    tool_calls: int = 0
    calls: int = 0  # generate calls so far
    finish_reason: str = ""
    done: bool = False
    extra: dict = field(default_factory=dict)


class Setting(ABC):
    name: ClassVar[str]
    uses_sandbox: ClassVar[bool] = False
    tools: ClassVar[list[dict] | None] = None  # JSON schemas passed to the chat template

    def __init__(self, config: SampleConfig, tokenizer, sandbox=None, workers: int = 1):
        if self.uses_sandbox and sandbox is None:
            raise ValueError(f"setting {self.name} needs a sandbox")
        self.config, self.tokenizer, self.sandbox, self.workers = config, tokenizer, sandbox, workers

    @abstractmethod
    def messages(self, problem: Problem) -> list[dict]:
        """The opening system + user messages."""

    @abstractmethod
    def run(self, samples: list[Sample], backend) -> None:
        """Advance every sample until done; fills code, completion and the counters."""

    def start(self, problem: Problem, sample_id: int) -> Sample:
        messages = self.messages(problem)
        return Sample(problem, sample_id, sample_seed(self.config, problem.id, sample_id), messages,
                      extra={"opening": len(messages)})

    def generate(self, samples: list[Sample], backend, stop=()) -> list[tuple[Sample, object]]:
        """One generate call continuing each sample's open assistant turn; returns (sample, completion).

        A call gets at most max_new_tokens, and all calls of a sample share max_total_tokens, so every
        setting spends the same compute per sample. A sample out of budget or context ends here
        (finish_reason "budget" or "context").
        """
        todo, prompts, budgets = [], [], []
        for s in samples:
            s.prompt = render(self.tokenizer, s.messages, tools=self.tools)
            prompt = s.prompt + s.assistant
            left = self.config.max_total_tokens - s.tokens_generated
            room = backend.context_length - backend.count_tokens(prompt)
            if min(left, room) <= 0:
                s.done, s.finish_reason = True, "budget" if left <= 0 else "context"
                continue
            todo.append(s)
            prompts.append(prompt)
            budgets.append(min(self.config.max_new_tokens, left, room))
        if not todo:
            return []
        seeds = [derive_seed(s.seed, s.calls) for s in todo]
        completions = backend.generate(prompts, seeds, budgets, self.config.temperature, self.config.top_p, stop)
        for s, c in zip(todo, completions):
            s.calls += 1
            s.tokens_generated += c.token_count
            s.finish_reason = c.finish_reason
        return list(zip(todo, completions))

    def transcript(self, s: Sample) -> str:
        """Every message after the opening ones, rendered as the model saw them."""
        opening = render(self.tokenizer, s.messages[:s.extra["opening"]], add_generation_prompt=False, tools=self.tools)
        full = render(self.tokenizer, s.messages, add_generation_prompt=False, tools=self.tools)
        if full.startswith(opening):
            return full[len(opening):]
        return "".join(f"{m['role']}: {m['content']}\n\n" for m in s.messages[s.extra["opening"]:])

    def map_sandbox(self, fn, items: list) -> list:
        """fn over items with as many sandbox calls in flight as there are workers."""
        if self.workers <= 1 or len(items) <= 1:
            return [fn(x) for x in items]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(fn, items))


def setting_class(name: str) -> type[Setting]:
    if name not in SETTINGS:
        raise ValueError(f"--setting: unknown setting {name!r} (known: {', '.join(SETTINGS)})")
    module, cls = SETTINGS[name].split(":")
    return getattr(importlib.import_module(module), cls)
