"""The `sample` section of the config as a typed object; defaults mirror schemas/config.schema.yaml."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ToolsConfig:
    max_tool_calls: int = 2  # Python tool calls per sample
    time_limit_s: float = 1.0  # CPU limit of one tool call


@dataclass(frozen=True)
class AgenticConfig:
    max_turns: int = 2  # submissions per sample; feedback comes from public tests only


@dataclass(frozen=True)
class SampleConfig:
    n: int = 8  # samples per problem
    max_new_tokens: int = 256  # tokens per generation call (one turn, or one stretch between tool calls)
    temperature: float = 0.8  # 0 means greedy
    top_p: float = 0.95
    batch_size: int = 32  # sequences per hf generate call; hf results are reproducible per batch_size
    backend: str = "auto"
    seed: int = 0  # base seed; each sample's seed derives from it, the problem id and the sample index
    tensor_parallel_size: int = 1  # vLLM only
    assistant_prefix: str = ""  # text every assistant turn starts with (e.g. to force a format)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    agentic: AgenticConfig = field(default_factory=AgenticConfig)

    @classmethod
    def from_dict(cls, d: dict | None) -> "SampleConfig":
        """Validate a settings dict (the config's `sample` section); errors name the key."""
        d = dict(d or {})
        d.pop("settings", None)  # the list of settings to run belongs to the workflow, not one run
        known = {f.name: f for f in dataclasses.fields(cls)}
        for key in d:
            if key not in known:
                raise ValueError(f"sample.{key}: unknown key (known: {', '.join(known)})")
        kw = {}
        for name, value in d.items():
            if name in ("tools", "agentic"):
                kw[name] = _nested(known[name].default_factory, name, value)
            else:
                kw[name] = _check(f"sample.{name}", value, type(getattr(cls, name)))
        cfg = cls(**kw)
        for name, ok, why in (
            ("n", cfg.n >= 1, "must be >= 1"), ("max_new_tokens", cfg.max_new_tokens >= 1, "must be >= 1"),
            ("batch_size", cfg.batch_size >= 1, "must be >= 1"), ("temperature", cfg.temperature >= 0, "must be >= 0"),
            ("top_p", 0 < cfg.top_p <= 1, "must be in (0, 1]"),
            ("tensor_parallel_size", cfg.tensor_parallel_size >= 1, "must be >= 1"),
            ("tools.max_tool_calls", cfg.tools.max_tool_calls >= 0, "must be >= 0"),
            ("tools.time_limit_s", cfg.tools.time_limit_s > 0, "must be > 0"),
            ("agentic.max_turns", cfg.agentic.max_turns >= 1, "must be >= 1"),
        ):
            if not ok:
                raise ValueError(f"sample.{name} {why}, got {_get(cfg, name)!r}")
        return cfg

    def params(self, setting: str) -> dict:
        """What a record stores to be regenerated: everything that shapes this setting's samples."""
        out = {k: getattr(self, k) for k in ("n", "max_new_tokens", "temperature", "top_p", "batch_size",
                                             "seed", "assistant_prefix")}
        if setting in ("tools", "agentic"):
            out[setting] = dataclasses.asdict(getattr(self, setting))
        return out


def _check(key: str, value, typ):
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, typ) or isinstance(value, bool) and typ is not bool:
        raise ValueError(f"{key}: expected {typ.__name__}, got {value!r}")
    return value


def _nested(cls, section: str, value):
    if not isinstance(value, dict):
        raise ValueError(f"sample.{section}: expected an object, got {value!r}")
    known = {f.name for f in dataclasses.fields(cls)}
    for key in value:
        if key not in known:
            raise ValueError(f"sample.{section}.{key}: unknown key (known: {', '.join(sorted(known))})")
    return cls(**{k: _check(f"sample.{section}.{k}", v, type(getattr(cls, k))) for k, v in value.items()})


def _get(cfg, dotted: str):
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg
