"""Writing merge outputs: safetensors shards laid out before the first tensor is computed, so blended
data is appended to every output block by block and no output is ever held in memory.

Why not safetensors.torch.save_file: it needs a whole shard in memory per output (shard size x alphas),
and here it wrote 512 MB of tensors in 2.8-4.3 s where 128 KiB write() calls took 0.7-0.9 s. The
format is small enough to write directly: an 8-byte little-endian header length, a JSON header giving
each tensor's dtype, shape and byte range, then the raw bytes in that order. Reading stays with
safetensors, and the tests load every output with safetensors and transformers.
"""
from __future__ import annotations

import json
import queue
import threading
from dataclasses import dataclass
from math import prod
from pathlib import Path

import torch

from ewa.merge import MergeError
from ewa.checkpoint import INDEX_FILE, WEIGHTS_FILE

DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "I32": 4,
               "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1}
# write() size: writes of a few hundred KiB are faster than MiB-sized or whole-tensor ones (docs/benchmarks.md).
WRITE_CHUNK = 128 << 10


def tensor_bytes(dtype: str, shape) -> int:
    if dtype not in DTYPE_BYTES:
        raise MergeError(f"safetensors dtype {dtype} is not supported by the merge")
    return DTYPE_BYTES[dtype] * prod(shape)


@dataclass(frozen=True)
class Layout:
    """Where every tensor goes in each output model; the same for all outputs of one merge."""

    files: list[str]  # shard file names
    shards: list[list[str]]  # tensor names per shard, in write order
    headers: list[bytes]  # safetensors header per shard
    total_size: int  # bytes of tensor data, for the index


def plan_layout(order: list[str], specs: dict, max_bytes: int) -> Layout:
    """Fill shards in stream order up to max_bytes (a larger tensor gets a shard of its own)."""
    shards, size = [[]], 0
    for name in order:
        nbytes = tensor_bytes(*specs[name])
        if shards[-1] and size + nbytes > max_bytes:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += nbytes
    n = len(shards)
    files = [WEIGHTS_FILE] if n == 1 else [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
    total = sum(tensor_bytes(*specs[name]) for name in order)
    return Layout(files, shards, [shard_header(names, specs) for names in shards], total)


def shard_header(names: list[str], specs: dict) -> bytes:
    entries, offset = {"__metadata__": {"format": "pt"}}, 0
    for name in names:
        dtype, shape = specs[name]
        nbytes = tensor_bytes(dtype, shape)
        entries[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    header = json.dumps(entries, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)  # keeps tensor data 8-byte aligned, as safetensors does
    return len(header).to_bytes(8, "little") + header


class BlockWriter:
    """One thread doing every file operation in submission order, so blending overlaps writing (write()
    releases the GIL). Blended data travels in a ring of fixed-size block buffers: when none is free the
    blender waits, which bounds memory whatever the model size, shard size or number of outputs."""

    def __init__(self, block_bytes: int, n_buffers: int, pin_memory: bool = False):
        self.block_bytes = block_bytes
        self.buffers = [torch.empty(block_bytes, dtype=torch.uint8, pin_memory=pin_memory) for _ in range(n_buffers)]
        # pinned buffers are filled by copies queued on a GPU stream: each gets an event the writer waits on
        # (blocking: it sleeps instead of spinning on a core the blending needs)
        self.ready = [torch.cuda.Event(blocking=True) for _ in range(n_buffers)] if pin_memory else []
        self.free, self.jobs = queue.SimpleQueue(), queue.SimpleQueue()
        for i in range(n_buffers):
            self.free.put(i)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="ewa-merge-write", daemon=True)
        self.thread.start()

    def take(self) -> tuple[int, torch.Tensor]:
        """A free block buffer (its id goes back with the write that consumes it)."""
        i = self.free.get()
        self._raise()
        return i, self.buffers[i]

    def ready_after(self, buffer: int, stream) -> None:
        """The buffer's bytes are those of the copies queued on `stream` so far (no-op without a GPU)."""
        if self.ready:
            self.ready[buffer].record(stream)

    def submit(self, fn, *args, buffer: int | None = None) -> None:
        self._raise()
        self.jobs.put((fn, args, buffer))

    def close(self, cancel: bool = False) -> None:
        """Wait for every queued write (skip them if cancelling) and stop the thread."""
        if cancel and self.error is None:
            self.error = MergeError("merge cancelled")
        self.jobs.put(None)
        self.thread.join()
        if not cancel:
            self._raise()

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            fn, args, buffer = job
            if self.error is None:  # after a failure, jobs only hand their buffers back
                try:
                    if buffer is not None and self.ready:
                        self.ready[buffer].synchronize()  # the device's copy into it has landed
                    fn(*args)
                except BaseException as e:  # surfaces in the blending thread
                    self.error = e
            if buffer is not None:
                self.free.put(buffer)

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error


def as_bytes(tensor: torch.Tensor):
    return tensor.reshape(-1).view(torch.uint8).numpy()  # no copy


class ModelWriter:
    """One output model directory: its shard files, each tensor appended in layout order."""

    def __init__(self, directory: Path, layout: Layout, writer: BlockWriter):
        self.directory, self.layout, self.writer = directory, layout, writer
        self.opens = {names[0]: i for i, names in enumerate(layout.shards)}
        self.handle = None

    def begin(self, name: str) -> None:
        """Called before a tensor's bytes: opens the next shard file where the layout starts one."""
        if name in self.opens:
            self.writer.submit(self._open, self.opens[name])

    def write(self, data, buffer: int | None = None) -> None:
        self.writer.submit(self._write, data, buffer=buffer)

    def close(self) -> None:
        """Queue the last shard's close and write the index; BlockWriter.close() completes the files."""
        self.writer.submit(self._close)
        if len(self.layout.files) > 1:
            weight_map = {t: file for file, names in zip(self.layout.files, self.layout.shards) for t in names}
            index = {"metadata": {"total_size": self.layout.total_size}, "weight_map": weight_map}
            (self.directory / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")

    def abort(self) -> None:
        """Close the open file after a failure (once the writer thread has stopped)."""
        self._close()

    # the methods below run on the writer thread
    def _open(self, i: int) -> None:
        self._close()
        self.handle = open(self.directory / self.layout.files[i], "wb")
        self.handle.write(self.layout.headers[i])

    def _write(self, data) -> None:
        view = memoryview(data)
        for start in range(0, len(view), WRITE_CHUNK):
            self.handle.write(view[start:start + WRITE_CHUNK])

    def _close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None
