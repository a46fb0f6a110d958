"""What the checks work on, made once and on first use: a few bundled mini problems, the tiny model, two
endpoints to merge, the merged grid and the samples of each run. Every check asks the bench, so any subset of
checks runs on its own (`--only`) and nothing is made twice."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ALPHAS = (-0.5, 0.0, 0.5, 1.0, 1.5)  # both extrapolations, both endpoints and the midpoint: the demo's grid
# Two mini families whose problems build in a fraction of a second (every family's do in ~15 s).
FAMILIES = ("stairs_ways", "sum_of_multiples")
PERTURBATION = 0.01  # the high endpoint: init + 0.01 * std * N(0, 1) per tensor, the size of a fine-tuning step


@dataclass(frozen=True)
class Sizes:
    """How much each check does: small on the CPU, on a GPU enough work that a difference from the CPU shows."""
    problems: int  # held-out problems sampled
    n: int  # samples per problem
    max_new_tokens: int
    grpo: dict  # the grpo keys the 2 GRPO steps override
    memory: dict  # the grpo keys the memory step overrides ({}: the config's setting)
    prompt_tokens: int | None  # of the memory step (None: --prompt-tokens)


CPU = Sizes(problems=2, n=4, max_new_tokens=48,
            grpo={"prompts_per_step": 2, "num_generations": 2, "max_completion_length": 32},
            memory={"prompts_per_step": 1, "num_generations": 2, "per_device_train_batch_size": 2,
                    "max_completion_length": 32}, prompt_tokens=32)
CUDA = Sizes(problems=4, n=8, max_new_tokens=160,
             grpo={"prompts_per_step": 2, "num_generations": 4, "max_completion_length": 128},
             memory={}, prompt_tokens=None)


def device_env(device: str) -> dict:
    """The environment of a child process that is to run on `device`: CUDA hidden for the CPU."""
    return {**os.environ, **({"CUDA_VISIBLE_DEVICES": ""} if device == "cpu" else {}),
            "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][-400:] if lines else ""


class Bench:
    def __init__(self, config: dict, work: Path, device: str, sizes: Sizes, model: str | None):
        self.config, self.work, self.device, self.sizes = config, work, device, sizes
        self.model = Path(model) if model else None
        self._made: dict = {}

    def once(self, key, make):
        if key not in self._made:
            self._made[key] = make()
        return self._made[key]

    # -- inputs -----------------------------------------------------------------------------------
    def problems(self) -> tuple[Path, Path]:
        """(train, held-out) problems files of the bundled mini set, a few families."""
        def make():
            from ewa.data.mini.loader import load
            from ewa.problems import write_problems

            paths = self.work / "data" / "train.jsonl", self.work / "data" / "heldout.jsonl"
            paths[0].parent.mkdir(parents=True, exist_ok=True)
            write_problems(load(split="train", seed=self.config["seed"], families=list(FAMILIES)), paths[0])
            heldout = load(split="heldout", seed=self.config["seed"], families=list(FAMILIES))
            write_problems(heldout[:self.sizes.problems], paths[1])
            return paths
        return self.once("problems", make)

    def init(self) -> Path:
        """The tiny model: --model, else the pipeline's init of this seed, else one built here (no SFT)."""
        def make():
            if self.model:
                return self.model
            built = Path(f"results/seed{self.config['seed']}/init")
            if self.config["model"]["init"] == "tiny" and (built / "config.json").is_file():
                return built
            from ewa.init.build import build_init

            model = {**self.config["model"], "init": "tiny", "sft": {**self.config["model"]["sft"], "steps": 0}}
            build_init(model, self.problems()[0], self.work / "init", seed=self.config["seed"],
                       sandbox=self.config["sandbox"])
            return self.work / "init"
        return self.once("init", make)

    def endpoints(self) -> tuple[Path, Path]:
        """(low, high): the init, and the init moved by a seeded perturbation of every tensor."""
        def make():
            import shutil

            import torch
            from safetensors.torch import load_file, save_file

            init, high = self.init(), self.work / "endpoints" / "high"
            shutil.copytree(init, high, ignore=shutil.ignore_patterns("*.safetensors", "*.safetensors.index.json"))
            generator = torch.Generator().manual_seed(self.config["seed"])
            for shard in sorted(init.glob("*.safetensors")):
                tensors = load_file(shard)
                for name, t in tensors.items():
                    if t.is_floating_point():
                        noise = torch.randn(t.shape, generator=generator) * t.float().std().clamp_min(1e-3)
                        tensors[name] = (t.float() + PERTURBATION * noise).to(t.dtype)
                save_file(tensors, high / shard.name, metadata={"format": "pt"})
            for index in init.glob("*.safetensors.index.json"):
                shutil.copy(index, high / index.name)
            return init, high
        return self.once("endpoints", make)

    # -- the stages -------------------------------------------------------------------------------
    def merged(self, device: str, run: int = 0) -> tuple[dict[float, Path], float]:
        """The alpha grid merged on `device` in one pass ({alpha: dir}, seconds)."""
        def make():
            from ewa.alphas import alpha_tag
            from ewa.merge import merge_linear

            low, high = self.endpoints()
            outs = {a: self.work / f"merged-{device}-{run}" / f"alpha{alpha_tag(a)}" for a in ALPHAS}
            started = time.perf_counter()
            merge_linear(low, high, list(outs), list(outs.values()), device=device,
                         max_shard_bytes=self.config["merge"]["max_shard_size"], progress=False)
            return outs, time.perf_counter() - started
        return self.once(("merged", device, run), make)

    def samples(self, device: str, run: int = 0) -> tuple[Path, dict]:
        """`ewa sample` (hf backend, reasoning) of the merged midpoint on `device`, in a child process: the hf
        backend takes the device torch sees, so the device is the child's environment. (samples file, its
        provenance)."""
        def make():
            from ewa.sample.run import provenance_path

            model = self.merged("cpu")[0][0.5]
            out = self.work / f"samples-{device}-{run}" / "reasoning.jsonl"
            sample = {**self.config["sample"], "backend": "hf", "n": self.sizes.n,
                      "max_new_tokens": min(self.config["sample"]["max_new_tokens"], self.sizes.max_new_tokens)}
            config = {"sample": sample, "sandbox": self.config["sandbox"], "seed": self.config["seed"]}
            argv = [sys.executable, "-m", "ewa.cli", "sample", "--config", json.dumps(config), "--model", str(model),
                    "--problems", str(self.problems()[1]), "--setting", "reasoning", "--stream", "gpu-check",
                    "--threads", "1", "--out", str(out)]
            out.parent.mkdir(parents=True, exist_ok=True)
            run_ = subprocess.run(argv, capture_output=True, text=True, env=device_env(device))
            (out.parent / "sample.log").write_text(run_.stdout + run_.stderr)
            if run_.returncode:
                raise RuntimeError(f"ewa sample on {device} exited {run_.returncode} ({out.parent / 'sample.log'}): "
                                   f"{last_line(run_.stderr)}")
            return out, json.loads(provenance_path(out).read_text())
        return self.once(("samples", device, run), make)
