"""Every script in benchmarks/ runs at its tiny size and prints its ratio against the baseline it names,
so a change in src/ewa that breaks a benchmark fails here instead of on the next person to measure."""
from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest
from helpers import ROOT, bwrap_usable

BENCHMARKS = ROOT / "benchmarks"
NUMBER = r"([0-9]+(?:\.[0-9]+)?)"  # not nan or inf: those mean a time of zero went into it


class Smoke(NamedTuple):
    args: list[str]  # "{tmp}" is the test's own directory
    ratio: str  # a regex naming the baseline; group 1 is the ratio
    needs_bwrap: bool = False


# A new benchmark fails test_benchmark_smoke until it has a tiny-size mode and a row here. Rows go
# longest run first: the runs start in this order, so the longest does not start last.
SMOKE = {
    "merge.py": Smoke(["--smoke", "--work", "{tmp}/merge"], rf"1 alpha, mergekit / ewa = {NUMBER}x"),
    "train_step.py": Smoke(["--smoke"], rf"baseline, whole GRPO step [^\n]*: [0-9.]+ s\n[^\n]*\n"
                                        rf"ratio reward / whole step: {NUMBER}x"),
    "sample.py": Smoke(["--smoke", "--out", "{tmp}/sample"], rf"ratio hf backend / raw generate: {NUMBER}x"),
    "worker.py": Smoke(["--smoke", "--out", "{tmp}/worker"], rf"ratio own processes / worker: {NUMBER}x\n"
                                                             rf"samples files that differ between the two: 0 of 2"),
    "frontier.py": Smoke(["--smoke"], rf"naive pandas groupby-apply \+ math\.comb [0-9.]+ s \| ratio {NUMBER}x"),
    "evaluate.py": Smoke(["--smoke"], rf"baseline, every copy run \(--judge-duplicates\): [0-9.]+ s\n"
                                      rf".*->\s+{NUMBER}x faster\n(.*\n)*"
                                      rf"one verdict cache for the grid: +[0-9.]+ s  ->  {NUMBER}x faster\n"
                                      rf"verdicts that differ between the two: 0 of [1-9]"),
    "sandbox.py": Smoke(["--smoke"], rf"ratio fork-server / naive: {NUMBER}x", needs_bwrap=True),
}


def smoke_run(script: str, tmp: Path) -> subprocess.CompletedProcess:
    args = [a.format(tmp=tmp) for a in SMOKE[script].args]
    # run in `tmp`: outputs a script puts under the working directory stay out of the checkout
    return subprocess.run([sys.executable, str(BENCHMARKS / script), *args], cwd=tmp, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def smoke_runs(request, tmp_path_factory):
    """script -> future of its smoke run. The selected scripts start at once, two at a time: each is mostly
    process start-up and imports on one core, so the two cores of a small machine share the wait."""
    selected = {item.callspec.params["script"] for item in request.session.items
                if getattr(item, "module", None) is request.module and hasattr(item, "callspec")}
    runnable = [s for s in SMOKE if s in selected and (bwrap_usable() or not SMOKE[s].needs_bwrap)]
    with ThreadPoolExecutor(2) as pool:
        futures = {s: pool.submit(smoke_run, s, tmp_path_factory.mktemp(s.removesuffix(".py"))) for s in runnable}
        yield futures
        for future in futures.values():
            future.cancel()  # after a failure under -x, the runs not yet started


def test_every_row_names_a_benchmark():
    assert set(SMOKE) <= {p.name for p in BENCHMARKS.glob("*.py")}


@pytest.mark.parametrize("script", sorted(p.name for p in BENCHMARKS.glob("*.py")))
def test_benchmark_smoke(script, smoke_runs):
    assert script in SMOKE, f"benchmarks/{script}: give it a --smoke mode and a row in SMOKE"
    smoke = SMOKE[script]
    if smoke.needs_bwrap and not bwrap_usable():
        pytest.skip("bubblewrap is not usable here")
    run = smoke_runs[script].result()
    assert run.returncode == 0, f"{script} exited {run.returncode}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    found = re.search(smoke.ratio, run.stdout)
    assert found, f"{script} printed no ratio line matching {smoke.ratio!r}:\n{run.stdout[-3000:]}"
    if script == "train_step.py":  # the reward is judged inside the step it is a share of
        assert float(found.group(1)) <= 1
