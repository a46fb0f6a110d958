"""The arithmetic of one tensor, block by block, into the write ring: base + sum_i c_i * (E_i - base) in
float32 for every output, cast back to the source dtype. On the CPU it is computed straight into the ring;
on a GPU the inputs' raw bytes cross in pinned buffers, both casts run on the card, and every copy is
queued on a side stream so the host's reading and the writer thread's writing never wait on the card.

Both paths run the same float32 operations (lerp for one term, add with alpha for several) on the same
values, and round to the source dtype the same way, so a GPU merge is bit for bit a CPU merge."""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import torch

from ewa.merge import MergeError
from ewa.merge.writer import BlockWriter, ModelWriter

# Sets of input staging buffers: the host fills one while the card copies from the other.
LANES = 2


def resolve_device(device: str = "auto") -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise MergeError(f"device {device!r}: torch sees no CUDA device (use --device auto or cpu)")
    if device != "cpu" and not device.startswith("cuda"):
        raise MergeError(f"device {device!r}: expected auto, cpu or cuda")
    return device


def output_terms(blended: list[tuple[ModelWriter, list[float]]]) -> list[tuple[ModelWriter, list[tuple[int, float]]]]:
    """Each output with its nonzero (input index, coefficient) terms; index 0 is the base."""
    return [(model, [(j, c) for j, c in enumerate(coefficients, 1) if c != 0]) for model, coefficients in blended]


def combine(part: list[torch.Tensor], terms: list[tuple[int, float]], deltas: dict, out: torch.Tensor) -> torch.Tensor:
    """base + sum c_j * (E_j - base) into `out` (float32). One term is a lerp (one pass, no delta buffer);
    several share each delta E_j - base across the outputs of the block (`deltas`)."""
    if len(terms) == 1:
        return torch.lerp(part[0], part[terms[0][0]], terms[0][1], out=out)
    for j, _ in terms:
        if j not in deltas:
            deltas[j] = part[j] - part[0]
    torch.add(part[0], deltas[terms[0][0]], alpha=terms[0][1], out=out)
    for j, c in terms[1:]:
        out.add_(deltas[j], alpha=c)
    return out


class HostBlend:
    """On the CPU: each block of the inputs is read from memory once for all outputs, computed in float32
    and cast to the source dtype straight into a ring buffer that the writer thread empties."""

    def __init__(self, writer: BlockWriter):
        self.writer = writer

    def __call__(self, tensors: list[torch.Tensor], blended) -> None:
        dtype, itemsize = tensors[0].dtype, tensors[0].element_size()
        flat = [t.reshape(-1) for t in tensors]
        step = self.writer.block_bytes // itemsize
        in_place = dtype == torch.float32  # no cast: compute straight into the buffer
        scratch = None if in_place else torch.empty(step, dtype=torch.float32)
        plans = output_terms(blended)
        for start in range(0, flat[0].numel(), step):
            part = [f[start:start + step].to(dtype=torch.float32) for f in flat]
            n, deltas = part[0].numel(), {}
            for model, terms in plans:
                i, buffer = self.writer.take()
                target = buffer[:n * itemsize].view(dtype)
                out = combine(part, terms, deltas, target if in_place else scratch[:n])
                if out is not target:
                    target.copy_(out)  # the cast back to the source dtype
                model.write(buffer[:n * itemsize].numpy(), buffer=i)

    def close(self) -> None:
        pass


@dataclass
class Lane:
    """One set of staging buffers, a block of every input: raw bytes in (pinned) host memory, their copy
    on the device, and the event after which the host may refill the host side."""

    host: list[torch.Tensor]
    device: list[torch.Tensor]
    copied: torch.cuda.Event | None


class DeviceBlend:
    """On a device: per block, the host copies each input's raw bytes (the source dtype, half of float32's
    for bf16) from the memory map into a pinned lane; a side stream copies them to the card, widens them to
    float32, blends every output, rounds it to the source dtype and copies it into a pinned ring buffer,
    whose event the writer thread waits on before writing. Two lanes: the host fills one while the card
    reads the other. With device 'cpu' the same code runs with ordinary memory, no stream and no events,
    which is how the suite exercises it without a GPU."""

    def __init__(self, device: str, writer: BlockWriter, lanes: int = LANES):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.stream = torch.cuda.Stream(self.device) if self.cuda else None
        self.writer, self.n_lanes, self.lanes, self.turn = writer, lanes, [], 0

    def lane(self, inputs: int) -> Lane:
        """The next lane in turn, once the card has taken what the host put in it last time."""
        if not self.lanes or len(self.lanes[0].host) != inputs:
            size = self.writer.block_bytes
            self.lanes = [Lane([torch.empty(size, dtype=torch.uint8, pin_memory=self.cuda) for _ in range(inputs)],
                               [torch.empty(size, dtype=torch.uint8, device=self.device) for _ in range(inputs)],
                               torch.cuda.Event(blocking=True) if self.cuda else None) for _ in range(self.n_lanes)]
        lane = self.lanes[self.turn % self.n_lanes]
        self.turn += 1
        if lane.copied is not None:
            lane.copied.synchronize()  # releases the GIL: the writer thread goes on writing meanwhile
        return lane

    def __call__(self, tensors: list[torch.Tensor], blended) -> None:
        dtype, itemsize = tensors[0].dtype, tensors[0].element_size()
        raw = [t.reshape(-1).view(torch.uint8) for t in tensors]
        step = self.writer.block_bytes // itemsize * itemsize
        plans = output_terms(blended)
        for start in range(0, raw[0].numel(), step):
            nbytes = min(step, raw[0].numel() - start)
            lane = self.lane(len(raw))
            for host, source in zip(lane.host, raw):
                host[:nbytes].copy_(source[start:start + nbytes])  # reads the memory map; no GIL held
            with torch.cuda.stream(self.stream) if self.cuda else nullcontext():
                for device, host in zip(lane.device, lane.host):
                    device[:nbytes].copy_(host[:nbytes], non_blocking=True)
                if lane.copied is not None:
                    lane.copied.record(self.stream)
                # the widening to float32 happens here, on the device: the same values as the CPU's
                part, deltas = [device[:nbytes].view(dtype).float() for device in lane.device], {}
                n = nbytes // itemsize
                for model, terms in plans:
                    out = combine(part, terms, deltas, torch.empty(n, dtype=torch.float32, device=self.device))
                    result = out.to(dtype)  # round on the device: only source-dtype bytes cross back
                    i, buffer = self.writer.take()
                    buffer[:nbytes].view(dtype).copy_(result, non_blocking=True)
                    self.writer.ready_after(i, self.stream)
                    model.write(buffer[:nbytes].numpy(), buffer=i)

    def close(self) -> None:
        """Wait for the card (nothing may still be copying into host memory) and let the buffers go."""
        if self.stream is not None:
            self.stream.synchronize()
        self.lanes = []
