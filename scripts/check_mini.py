#!/usr/bin/env python3
"""Check the mini problem set's trade-off: run every instance's brute-force, efficient and wrong reference
programs as plain subprocesses against its tests and assert, per instance:

  efficient  accepted on every test, CPU <= 0.25 x time limit everywhere
  brute      accepted on the low regime (smaller half) with CPU <= 0.25 x limit; TLE or MLE on the
             largest quarter, and >= 4 x limit (or MLE) on the largest test; never a wrong answer
  wrong      each variant accepted on the smallest (public) test and wrong (WA/RE) on some test

Prints one row per family and exits 1 listing every violation. CPU time is the child's own
(os.wait4), capped with ITIMER_PROF; memory is capped with RLIMIT_AS at the problem's limit.

    .venv/bin/python scripts/check_mini.py [--families a,b] [--split all] [--jobs 2]
"""
from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor, as_completed

from ewa.data.mini import FAMILIES, build
from ewa.problems import Problem
from ewa.tiers import regime_tests

PYTHON = "/usr/bin/python3"
LOW = {"name": "low", "fraction": 0.5}  # the default low-coverage regime
NOT_TOP = {"name": "three_quarters", "fraction": 0.75}  # complement: the largest quarter
EFFICIENT_MAX, BRUTE_SMALL_MAX, BRUTE_LARGEST_MIN = 0.25, 0.25, 4.0  # multiples of the time limit


def run(source: str, stdin: str, cap_s: float, memory_mb: int) -> tuple[str, float, str]:
    """(status, cpu seconds, stdout); status is ok, TLE (cap reached), MLE or RE.

    A program killed by the CPU timer is reported at the cap: the kernel's timer, not the (coarser)
    rusage sum, decides when the cap is reached."""
    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        signal.setitimer(signal.ITIMER_PROF, cap_s)  # survives exec: SIGPROF kills at cap_s of CPU

    with tempfile.TemporaryFile() as fin, tempfile.TemporaryFile() as fout, tempfile.TemporaryFile() as ferr:
        fin.write(stdin.encode())
        fin.seek(0)
        p = subprocess.Popen([PYTHON, "-I", "-c", source], stdin=fin, stdout=fout, stderr=ferr,
                             preexec_fn=limits)
        deadline = time.monotonic() + 10 * cap_s + 10  # wall backstop for a loaded machine
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
            time.sleep(0.002)
        p.returncode = status
        cpu = usage.ru_utime + usage.ru_stime
        fout.seek(0)
        ferr.seek(0)
        out, err = fout.read().decode(errors="replace"), ferr.read().decode(errors="replace")
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGPROF, signal.SIGKILL) or cpu >= cap_s:
        return "TLE", max(cpu, cap_s), out
    if "MemoryError" in err or usage.ru_maxrss > memory_mb * 1024:
        return "MLE", cpu, out
    if os.waitstatus_to_exitcode(status) != 0:
        return "RE", cpu, out
    return "ok", cpu, out


def verdict(status: str, cpu: float, out: str, expected: str, limit: float) -> str:
    if status != "ok":
        return status
    if cpu > limit:
        return "TLE"
    return "AC" if out.split() == expected.split() else "WA"


def check_problem(p: Problem) -> dict:
    """Run the three kinds of reference on every test; return per-test verdicts and CPU times."""
    L, mem = p.time_limit_s, p.memory_limit_mb
    sol, order = p.meta["solutions"], sorted(range(len(p.tests)), key=lambda i: p.tests[i].size)
    largest, low = order[-1], set(regime_tests(p, LOW))
    res = {"id": p.id, "family": p.meta["family"], "limit": L, "order": order, "low": sorted(low),
           "top": [i for i in order if i not in set(regime_tests(p, NOT_TOP))]}

    def judge(source, i, cap):
        status, cpu, out = run(source, p.tests[i].input, cap, mem)
        return verdict(status, cpu, out, p.tests[i].output, L), cpu

    res["efficient"] = [judge(sol["efficient"], i, L) for i in range(len(p.tests))]
    res["brute"] = [judge(sol["brute"], i, BRUTE_LARGEST_MIN * L if i == largest else L) for i in range(len(p.tests))]
    res["wrong"] = [[judge(w, i, L) for i in range(len(p.tests))] for w in sol["wrong"]]
    return res


def violations(r: dict) -> list[str]:
    L, out, order = r["limit"], [], r["order"]
    for i, (v, cpu) in enumerate(r["efficient"]):
        if v != "AC" or cpu > EFFICIENT_MAX * L:
            out.append(f"efficient on test {i}: {v} in {cpu:.3f}s (> {EFFICIENT_MAX} x {L}s?)")
    for i, (v, cpu) in enumerate(r["brute"]):
        if v in ("WA", "RE"):
            out.append(f"brute on test {i}: {v}")
    for i in r["low"]:
        v, cpu = r["brute"][i]
        if v != "AC" or cpu > BRUTE_SMALL_MAX * L:
            out.append(f"brute on low-regime test {i}: {v} in {cpu:.3f}s (want AC <= {BRUTE_SMALL_MAX} x {L}s)")
    for i in r["top"]:
        if r["brute"][i][0] not in ("TLE", "MLE"):
            out.append(f"brute on largest-quarter test {i}: {r['brute'][i][0]} (want TLE or MLE)")
    v, cpu = r["brute"][order[-1]]
    if v != "MLE" and cpu < BRUTE_LARGEST_MIN * L * 0.99:
        out.append(f"brute on the largest test: {v} in {cpu:.3f}s (want >= {BRUTE_LARGEST_MIN} x {L}s or MLE)")
    for k, runs in enumerate(r["wrong"]):
        if runs[order[0]][0] != "AC":
            out.append(f"wrong[{k}] on the smallest test: {runs[order[0]][0]} (want AC)")
        if not any(v in ("WA", "RE") for v, _ in runs):
            out.append(f"wrong[{k}] is never wrong")
    return out


def fmt_rank(rs: list[dict], kind: str, rank: int) -> str:
    """Median CPU across instances on the test of this size rank, in time limits; MLE if any ran out."""
    vs = [r[kind][r["order"][rank]] for r in rs]
    if any(v == "MLE" for v, _ in vs):
        return "MLE"
    x = statistics.median(cpu for _, cpu in vs) / rs[0]["limit"]
    cap = BRUTE_LARGEST_MIN if rank == len(rs[0]["order"]) - 1 else 1.0
    return f">{cap:g}" if x >= cap else f"{x:.2f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", help="comma-separated family names (default: all)")
    ap.add_argument("--split", default="all", choices=("train", "heldout", "all"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    families = args.families.split(",") if args.families else None
    problems = build(seed=args.seed, split=args.split, families=families)
    print(f"checking {len(problems)} instances of {len({p.meta['family'] for p in problems})} families "
          f"with {args.jobs} workers", file=sys.stderr)
    results = defaultdict(list)
    t0 = time.time()
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(check_problem, p) for p in problems]
        for k, fut in enumerate(as_completed(futures), 1):
            r = fut.result()
            results[r["family"]].append(r)
            if k % 10 == 0:
                print(f"  {k}/{len(problems)} instances, {time.time() - t0:.0f}s", file=sys.stderr)

    head = (f"{'family':26} {'inst':>4} | brute CPU / limit, median by size rank 1..8" + " " * 11
            + f"| eff max | wrong: public ok, first failing rank")
    print(head)
    print("-" * len(head))
    bad = []
    for name in FAMILIES:
        rs = results.get(name)
        if not rs:
            continue
        L = rs[0]["limit"]
        ranks = [fmt_rank(rs, "brute", k) for k in range(len(rs[0]["order"]))]
        eff = max(cpu for r in rs for _, cpu in r["efficient"]) / L
        wrong_cols = []
        for k in range(len(rs[0]["wrong"])):
            ok = sum(r["wrong"][k][r["order"][0]][0] == "AC" for r in rs)
            first = [min((rank for rank, i in enumerate(r["order"]) if r["wrong"][k][i][0] in ("WA", "RE")),
                         default=None) for r in rs]
            shown = ",".join(str(f + 1) if f is not None else "-" for f in first)
            wrong_cols.append(f"{ok}/{len(rs)} [{shown}]")
        print(f"{name:26} {len(rs):>4} | {' '.join(f'{x:>5}' for x in ranks)} | {eff:7.2f} | {'; '.join(wrong_cols)}")
        for r in rs:
            bad += [f"{r['id']}: {v}" for v in violations(r)]
    print(f"\nlimit per family: " + ", ".join(sorted({f"{rs[0]['limit']}s" for rs in results.values()})),
          f"| {sum(map(len, results.values()))} instances | {time.time() - t0:.0f}s")
    if bad:
        print(f"\n{len(bad)} violation(s):")
        print("\n".join(f"  {v}" for v in bad))
        return 1
    print("all properties hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
