"""Build the inits of a report's runs side by side, before the runs themselves (`make science`).

A run's init is the one job its DAG can run while it trains, and SFT on a tiny model gains little from a
second thread, so the study's init and that of a control whose change is the SFT mix finish sooner side by
side on one thread each than one after another on two. Each init is built on one thread whatever the cores
and however many inits there are: on CPUs where torch splits reductions across threads (AVX-512 builds) the
thread count changes the init's bytes, and a report's init must not depend on the machine's core count or
on which controls ran (docs/benchmarks.md#make-science-the-inits-side-by-side). At most --cores inits train
at once. A run that starts from another's init (`science.init_from`) builds none here.

    python scripts/science_inits.py --cores 2 .=configs/science.yaml \
        results/controls/no-wrong=configs/control-no-wrong.yaml
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from ewa.config import ConfigError, load

ROOT = Path(__file__).resolve().parent.parent


def runs_with_own_init(runs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (directory, config) pairs whose config builds its init rather than naming another run's."""
    own = []
    for directory, config in runs:
        try:
            science = load(config)["science"]
        except ConfigError as err:
            sys.exit(f"science_inits: {err}")
        if not science.get("init_from"):
            own.append((directory, config))
    return own


def snakemake_command(directory: str, config: str, cores: int) -> list[str]:
    command = [str(Path(sys.executable).parent / "snakemake"), "science_init", "--profile", "profiles/local",
               "--cores", str(cores), "--configfile", str(Path(config).resolve())]
    if (ROOT / directory).resolve() != ROOT:  # the command runs in the checkout
        command += ["--snakefile", str(ROOT / "Snakefile"), "--directory", directory]
    return command


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, required=True, help="how many inits train at once (each on one core)")
    parser.add_argument("runs", nargs="+", metavar="DIR=CONFIG", help="a run's directory and its config")
    args = parser.parse_args()
    if bad := [run for run in args.runs if "=" not in run]:
        parser.error(f"{bad[0]}: expected DIR=CONFIG (a run's directory and its config)")
    runs = runs_with_own_init([tuple(run.split("=", 1)) for run in args.runs])
    at_once, failed = max(1, args.cores), []
    for start in range(0, len(runs), at_once):  # one core each
        jobs = [(directory, subprocess.Popen(snakemake_command(directory, config, 1), cwd=ROOT))
                for directory, config in runs[start:start + at_once]]
        failed += [directory for directory, job in jobs if job.wait() != 0]
    if failed:
        print(f"science_inits: the init of {', '.join(failed)} failed (its Snakemake log says why)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
