"""The config's `sample` section as a typed object. Its values, defaults included, come from the schema
through the validated section the CLI hands over; this module only gives them names and types."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolsConfig:
    max_tool_calls: int  # Python tool calls per sample
    time_limit_s: float  # CPU limit of one tool call
    submit: str  # "restated" | "last_run": what a sample submits when the model does not restate its program


@dataclass(frozen=True)
class AgenticConfig:
    max_turns: int  # submissions per sample; feedback comes from public tests only


@dataclass(frozen=True)
class SampleConfig:
    n: int  # samples per problem
    max_new_tokens: int  # tokens per generation call (one turn, or one stretch between tool calls)
    max_total_tokens: int  # generated tokens per sample, shared by all its calls and turns
    temperature: float  # 0 means greedy
    top_p: float
    batch_size: int  # sequences per hf generate call; hf results are reproducible per batch_size
    rows_per_call: int  # vLLM: sequences per engine call (many problems packed; continuous batching)
    backend: str
    tensor_parallel_size: int  # vLLM: GPUs per engine
    data_parallel_size: int  # vLLM: engines per job, each on its own GPUs (or cores)
    assistant_prefix: str  # text every assistant turn starts with (e.g. to force a format)
    tools: ToolsConfig
    agentic: AgenticConfig
    common_random_numbers: bool  # every model draws the same random streams (paired comparisons)
    seed: int  # the run's seed; each sample's seed derives from it, the stream, the problem and the index
    stream: str  # which model's draws these are (e.g. alpha+0.50); unused with common random numbers

    @classmethod
    def from_dict(cls, sample: dict, seed: int, stream: str) -> "SampleConfig":
        """The validated `sample` section as typed settings. Its list of `settings` is the workflow's, not
        one run's, and is not read. `stream` names the model sampled, so that different models draw
        independent samples."""
        typed = {"temperature": float(sample["temperature"]), "top_p": float(sample["top_p"]),
                 "tools": ToolsConfig(**{**sample["tools"], "time_limit_s": float(sample["tools"]["time_limit_s"])}),
                 "agentic": AgenticConfig(**sample["agentic"]), "seed": int(seed),
                 "stream": "" if sample["common_random_numbers"] else stream}
        return cls(**{f.name: typed[f.name] if f.name in typed else sample[f.name] for f in dataclasses.fields(cls)})

    def params(self, setting: str) -> dict:
        """What a record stores to be regenerated: everything that shapes this setting's samples."""
        out = {k: getattr(self, k) for k in ("n", "max_new_tokens", "max_total_tokens", "temperature", "top_p",
                                             "batch_size", "seed", "stream", "assistant_prefix")}
        if setting in ("tools", "agentic"):
            out[setting] = dataclasses.asdict(getattr(self, setting))
        return out
