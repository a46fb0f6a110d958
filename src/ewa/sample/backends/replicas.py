"""Data-parallel vLLM: which devices (or cores) each engine replica gets, and how one engine call's rows
are dealt to the replicas and put back in order. Pure functions; `vllm.py` starts the processes."""
from __future__ import annotations

from dataclasses import dataclass

from ewa.errors import UserError


@dataclass(frozen=True)
class EngineShare:
    """What one engine replica may use: its GPUs, or on a CPU-only machine its cores."""
    devices: tuple[str, ...] = ()  # CUDA_VISIBLE_DEVICES entries (indices or UUIDs)
    cpus: tuple[int, ...] = ()

    def describe(self) -> str:
        return f"GPU {','.join(self.devices)}" if self.devices else f"CPU {','.join(map(str, self.cpus))}"

    def env(self) -> dict[str, str]:
        if self.devices:
            return {"CUDA_VISIBLE_DEVICES": ",".join(self.devices)}
        # vLLM's CPU binding (VLLM_CPU_OMP_THREADS_BIND) only acts in its multiprocess executor; ewa's
        # CPU engines run in one process, where torch takes its thread count from OMP_NUM_THREADS.
        return {"OMP_NUM_THREADS": str(len(self.cpus))} if self.cpus else {}


def visible_gpus(environ: dict, device_count: int) -> list[str]:
    """The job's GPUs: CUDA_VISIBLE_DEVICES when set (SLURM sets it), else every device torch counts."""
    if "CUDA_VISIBLE_DEVICES" in environ:
        return [d.strip() for d in environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
    return [str(i) for i in range(device_count)]


def gpu_shares(tensor_parallel: int, data_parallel: int, gpus: list[str]) -> list[EngineShare]:
    """Consecutive slices of `tensor_parallel` GPUs, one per engine (neighbours share the fastest links).

    >>> [s.devices for s in gpu_shares(2, 2, ["0", "1", "2", "3"])]
    [('0', '1'), ('2', '3')]
    """
    need = tensor_parallel * data_parallel
    if len(gpus) < need:
        raise UserError(f"sample.data_parallel_size {data_parallel} x sample.tensor_parallel_size {tensor_parallel} "
                        f"needs {need} GPUs, the job sees {len(gpus)} ({','.join(gpus) or 'none'}): lower "
                        f"sample.data_parallel_size or give the sample job more GPUs")
    return [EngineShare(devices=tuple(gpus[i * tensor_parallel:(i + 1) * tensor_parallel]))
            for i in range(data_parallel)]


def cpu_shares(data_parallel: int, cpus: list[int]) -> list[EngineShare]:
    """Disjoint, near-equal sets of the job's cores, so engines do not spin against each other.

    >>> [s.cpus for s in cpu_shares(2, [0, 1, 2, 3, 4])]
    [(0, 1, 2), (3, 4)]
    """
    if len(cpus) < data_parallel:
        raise UserError(f"sample.data_parallel_size {data_parallel}: the job has {len(cpus)} CPU cores and no GPU, "
                        f"fewer than one core per engine")
    per, extra = divmod(len(cpus), data_parallel)
    bounds = [i * per + min(i, extra) for i in range(data_parallel + 1)]
    return [EngineShare(cpus=tuple(cpus[bounds[i]:bounds[i + 1]])) for i in range(data_parallel)]


def deal(rows: int, engines: int) -> list[list[int]]:
    """Row indices per engine: row i to engine i % engines. A call holds each problem's n samples side by
    side, so every engine gets its share of the long and the short problems.

    >>> deal(5, 2)
    [[0, 2, 4], [1, 3]]
    """
    return [list(range(k, rows, engines)) for k in range(engines)]


def gather(parts: list[list[int]], replies: list[list]) -> list:
    """Each engine's replies back at their rows' places: the inverse of `deal`.

    >>> gather(deal(5, 2), [["a", "c", "e"], ["b", "d"]])
    ['a', 'b', 'c', 'd', 'e']
    """
    out = [None] * sum(map(len, parts))
    for rows, got in zip(parts, replies, strict=True):
        if len(rows) != len(got):
            raise RuntimeError(f"vllm worker answered {len(got)} rows, was sent {len(rows)}")
        for i, reply in zip(rows, got):
            out[i] = reply
    return out
