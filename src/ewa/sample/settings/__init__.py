"""Inference settings, registered by the name the config uses: each drives the conversations of a
batch of samples through a backend (and, for tools/agentic, the sandbox) until every one is done.
"""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from ewa.problems import Problem
from ewa.sample.chat import render
from ewa.sample.config import SampleConfig
from ewa.sample.records import derive_seed

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
    assistant: str = ""  # the assistant turn being written (prefix, generated text, tool outputs)
    completion: str = ""  # the transcript after the prompt, once done
    code: str | None = None
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
        return Sample(problem, sample_id, derive_seed(self.config.seed, problem.id, sample_id),
                      self.messages(problem))

    def generate(self, samples: list[Sample], backend, stop=()) -> list[tuple[Sample, object]]:
        """One generate call continuing each sample's open assistant turn; returns (sample, completion).

        A sample whose context is full ends here with finish_reason "context".
        """
        todo, prompts, budgets = [], [], []
        for s in samples:
            prompt = render(self.tokenizer, s.messages) + s.assistant
            budget = min(self.config.max_new_tokens, backend.context_length - backend.count_tokens(prompt))
            if budget <= 0:
                s.done, s.finish_reason = True, "context"
                continue
            todo.append(s)
            prompts.append(prompt)
            budgets.append(budget)
        if not todo:
            return []
        seeds = [derive_seed(s.seed, s.calls) for s in todo]
        completions = backend.generate(prompts, seeds, budgets, self.config.temperature, self.config.top_p, stop)
        for s, c in zip(todo, completions):
            s.calls += 1
            s.tokens_generated += c.token_count
            s.finish_reason = c.finish_reason
        return list(zip(todo, completions))

    def map_sandbox(self, fn, items: list) -> list:
        """fn over items with as many sandbox calls in flight as there are workers."""
        if self.workers <= 1 or len(items) <= 1:
            return [fn(x) for x in items]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(fn, items))


def with_system(messages: list[dict], extra: str) -> list[dict]:
    """`messages` with `extra` appended to the system message (one is added if there is none)."""
    out = [dict(m) for m in messages]
    if out and out[0]["role"] == "system":
        out[0]["content"] = out[0]["content"].rstrip() + "\n" + extra
    else:
        out.insert(0, {"role": "system", "content": extra})
    return out


def setting_class(name: str) -> type[Setting]:
    if name not in SETTINGS:
        raise ValueError(f"--setting: unknown setting {name!r} (known: {', '.join(SETTINGS)})")
    module, cls = SETTINGS[name].split(":")
    return getattr(importlib.import_module(module), cls)
