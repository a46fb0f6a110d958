"""Calibration: time a fixed pure-Python workload in the sandbox interpreter and write the factor
(this machine's CPU time / the nominal machine's) that scales every time limit, so TLE verdicts from
a laptop, a CI box and a cluster node agree."""
from __future__ import annotations

import functools
import json
from pathlib import Path


# CPU seconds the reference workload takes on the nominal machine (the 2-core box the miniature was
# built on, /usr/bin/python3 3.11), so that machine's factor is ~1.0.
NOMINAL_CPU_S = 0.24
REPEATS = 5

# Integer arithmetic, dict and list traffic, string building: the mix typical solutions spend time on.
REFERENCE = """
import time
t0 = time.process_time()
acc, seen, row = 0, {}, []
for i in range(1000000):
    acc = (acc * 31 + i) % 1000003
    seen[acc & 4095] = i
    row.append(acc)
    if len(row) > 64:
        row.sort(); del row[:32]
s = "".join(str(x) for x in range(60000))
acc += len(s) + sum(seen.values())
print(time.process_time() - t0, acc)
"""


def measure(sandbox, repeats: int = REPEATS) -> dict:
    """Run the workload `repeats` times in `sandbox` (factor 1) and keep the fastest run."""
    times = []
    for _ in range(repeats):
        run = sandbox.run_code(REFERENCE, time_limit_s=30.0, memory_limit_mb=512, scaled=False)
        if run.status != "ok":
            raise RuntimeError(f"calibration workload failed ({run.status}): {run.stderr[-500:]}")
        times.append(float(run.stdout.split()[0]))
    best = min(times)
    return {"time_factor": best / NOMINAL_CPU_S, "reference_cpu_s": best, "nominal_cpu_s": NOMINAL_CPU_S,
            "runs_cpu_s": times, "backend": sandbox.backend.name, "python": sandbox.python_version}


@functools.lru_cache(maxsize=None)
def measure_once(settings) -> dict:
    """One calibration per process and sandbox settings (backend resolved, one worker), for sandboxes
    created without a factor."""
    from ewa.sandbox import Sandbox
    with Sandbox(settings, time_factor=1.0) as sb:
        return {**measure(sb), "source": "measured at start"}


def resolve(settings, time_factor: float | None = None, calibration_path: str | None = None,
            resumed: float | None = None) -> dict:
    """The calibration record a sandbox applies, by precedence: an explicit factor, a calibration file,
    the factor an interrupted job started with (so its verdicts stay comparable), a measurement now."""
    if time_factor is not None:
        if time_factor <= 0:
            raise ValueError(f"time_factor must be positive, got {time_factor}")
        return {"time_factor": float(time_factor), "source": "given"}
    if calibration_path is not None:
        return read_calibration(calibration_path)
    if resumed is not None:
        return {"time_factor": float(resumed), "source": "the interrupted run's"}
    return measure_once(settings)


def read_calibration(path: str | Path) -> dict:
    try:
        record = json.loads(Path(path).read_text())
        factor = record["time_factor"]
    except FileNotFoundError:
        raise ValueError(f"{path}: calibration file not found (make it with `ewa calibrate --out {path}`)") from None
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ValueError(f"{path}: not a calibration file (needs a 'time_factor')") from None
    if not isinstance(factor, (int, float)) or isinstance(factor, bool) or factor <= 0:
        raise ValueError(f"{path}: field 'time_factor' must be a positive number, got {factor!r}")
    return {**record, "source": str(path)}
