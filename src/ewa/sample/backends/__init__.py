"""Sampling backends, registered by the name `sample.backend` uses: `hf` (transformers, the CPU
default) and `vllm` (GPU runs; in-process, or a worker in its own venv). `auto` picks between them.

Every backend answers one completion per (prompt, seed): settings advance each sample's own
conversation, so n samples of a problem are n prompts with n seeds.
"""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Sequence

BACKENDS = {"hf": "ewa.sample.backends.hf:HFBackend", "vllm": "ewa.sample.backends.vllm:VLLMBackend"}


@dataclass
class Completion:
    text: str  # special tokens stripped; ends with the stop string when one stopped it
    token_count: int  # generated tokens, the end-of-turn token included
    finish_reason: str  # "stop" (end of turn or a stop string) or "length"


class Backend(ABC):
    name: ClassVar[str]
    context_length: int  # prompt + completion tokens the model can attend to
    info: dict  # what the provenance records about the engine (device, versions)

    @abstractmethod
    def generate(self, prompts: Sequence[str], seeds: Sequence[int], max_new_tokens: int | Sequence[int],
                 temperature: float, top_p: float, stop: Sequence[str] = ()) -> list[Completion]:
        """One completion per prompt, sampled with that prompt's seed; `stop` strings end a completion."""

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def backend_class(name: str) -> type[Backend]:
    if name not in BACKENDS:
        raise ValueError(f"sample.backend: unknown backend {name!r} (known: auto, {', '.join(BACKENDS)})")
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def resolve_backend(name: str) -> str:
    """`auto`: vLLM when a GPU is present and vLLM can run (here or in .venv-vllm), else transformers."""
    if name != "auto":
        backend_class(name)  # validates the name
        return name
    import torch

    from ewa.sample.backends.vllm import vllm_available
    return "vllm" if torch.cuda.is_available() and vllm_available() else "hf"


def make_backend(name: str, model_dir: str, tokenizer, settings, **options) -> Backend:
    """`options` go to the backend's constructor (the hf backend takes `device`)."""
    return backend_class(resolve_backend(name))(model_dir, tokenizer, settings, **options)
