"""Process-wide settings of a computing stage (ewa.runtime): the allocator keeps what torch frees."""
from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

# One process per case: the allocator's settings hold for the life of a process. Each round stands for a
# training step: activations of 4-12 MB whose sizes change from step to step (batches of other lengths),
# all freed at its end. The page faults of the rounds after the first two are what the next steps pay.
STEPS = """
import json, resource, sys, torch
from ewa.runtime import configure_cpu
if sys.argv[1] == "configured":
    configure_cpu(1)
faults = []
for step in range(8):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    activations = [torch.ones(((4 + (step * 7 + i * 3) % 9) << 20) // 4) for i in range(16)]
    del activations
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps(faults))
"""


def step_faults(case: str) -> list[int]:
    out = subprocess.run([sys.executable, "-c", STEPS, case], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the setting is glibc's (mallopt)")
def test_freed_tensors_memory_serves_the_next_steps_without_page_faults():
    configured = step_faults("configured")
    pages_per_step = (8 << 20) * 16 // 4096  # ~32k pages of activations at 8 MB on average
    assert configured[0] > pages_per_step // 2  # the first step faults its memory in, as always
    assert sum(configured[2:]) < pages_per_step // 2  # later steps reuse it: no new pages to zero
    # Without the setting glibc returns the heap's free top to the kernel and later steps fault again: the
    # test notices the setting gone.
    assert sum(step_faults("default")[2:]) > sum(configured[2:])
