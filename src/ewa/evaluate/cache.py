"""Verdicts kept across evaluation runs (`evaluate.verdict_cache`): a program already judged on the
same problem, under the same judge, sandbox, limits and code, is not run again.

A model repeats itself across merged checkpoints and settings as much as within one samples file, and
each program that times out costs its whole time limit, so judging each (problem, program) pair once per
run saves most of a grid's judging (measured in docs/benchmarks.md#verdict-cache).

One JSON file per key, written to a temporary name and renamed, so evaluations running side by side (or
on the nodes of a cluster sharing the directory) share it and a killed job leaves no half entry (its
temporary, named by host and pid, is removed by the next evaluation on that host); two jobs that judge
the same pair at once write the same verdict. The key holds everything the verdict
depends on: the problem's whole record (tests, limits, judge semantics), the program, early stopping,
the problem's test tiers, the sandbox section, the time factor and calibration the limits are scaled
by, and a hash of the sandbox's and the judge's source, so a changed judge never reads an old verdict.
A verdict near its time limit is a measurement: it is measured once, and every copy reads that one.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import socket
from functools import lru_cache
from pathlib import Path

from ewa.io import pid_alive
from ewa.sandbox.results import SampleResult, TestResult

FORMAT = 1  # bump when the stored record changes


@lru_cache(maxsize=1)
def judge_source_hash() -> str:
    """sha256 over the source of ewa.sandbox and this package: what decides a verdict."""
    import ewa.evaluate
    import ewa.sandbox
    h = hashlib.sha256()
    for package in (ewa.sandbox, ewa.evaluate):
        for path in sorted(Path(package.__file__).parent.glob("*.py")):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


class VerdictCache:
    def __init__(self, root: str | os.PathLike, context: dict):
        """context: what every verdict of this run is judged under (sandbox, time factor, ...)."""
        self.root = Path(root)
        self.context = json.dumps({"format": FORMAT, "judge_source": judge_source_hash(), **context},
                                  sort_keys=True, default=str)
        self.remove_dead_temporaries()

    def remove_dead_temporaries(self) -> None:
        """Remove the temporaries of killed evaluations on this host (a live one's pid still runs)."""
        pattern = re.compile(rf"\.[0-9a-f]{{64}}\.{re.escape(socket.gethostname())}\.(\d+)\.tmp")
        for path in self.root.glob("*/.*.tmp"):
            match = pattern.fullmatch(path.name)
            if match and not pid_alive(int(match[1])):
                path.unlink(missing_ok=True)

    def key(self, problem_record: str, code: str | None, tiers) -> str:
        blob = json.dumps([self.context, problem_record, code, tiers], default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> tuple[SampleResult, str] | None:
        """(the verdict, where it was judged), or None when this pair was never judged so."""
        try:
            entry = json.loads(self._path(key).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        fields = entry["result"]
        return SampleResult(**{**fields, "tests": [TestResult(**t) for t in fields["tests"]]}), entry["origin"]

    def put(self, key: str, result: SampleResult, origin: str) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{key}.{socket.gethostname()}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"origin": origin, "result": dataclasses.asdict(result)}))
        os.replace(tmp, path)
