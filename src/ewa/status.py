"""`ewa status [DIR]`: one screen on a run, while it goes or after it ended, here or on a cluster's shared
filesystem: jobs done, running, failed and pending per rule; each running training's step, last reward and
verdict mix; each running job's progress; the failed and killed jobs with their log; an ETA for the rest.

It reads what is already on disk, no server and no database:
- the jobs and which are done: Snakemake's dry run of the whole DAG (`snakemake -n --forceall`, each job with
  its rule, outputs and log), with the run's --configfile and --profile, against the outputs on disk;
- what runs: each long job's progress file (`logs/progress/...json`, ewa.progress), with host, pid and a
  heartbeat. A job whose heartbeat stopped (or whose process is gone, on this host) was killed; Snakemake's
  incomplete markers (.snakemake/incomplete) name the other jobs a run had started;
- the ETA: each rule's time per job measured in this run (its finished jobs' progress files, else its
  running jobs' elapsed time plus their ETA), else `ewa plan`'s hours per job for the rule, scaled by how
  the measured rules compare with their plan. See `eta`.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ewa.errors import UserError
from ewa.io import pid_alive
from ewa.progress import DONE, FAILED, RUNNING, STALE_S, duration, number, read_progress

PROGRESS_DIR = Path("logs") / "progress"
PLANNED_RULES = ("init", "train", "merge", "sample", "evaluate")  # the rules `ewa plan` gives hours for
KILLED = "killed"


@dataclass
class Job:
    rule: str
    outputs: list[str]
    log: str | None
    to_run: bool  # not done yet
    inputs: list[str] = field(default_factory=list)
    state: str = "pending"  # done, running, failed, killed, pending
    progress: dict | None = None
    why: str | None = None  # a failed or killed job's reason
    remaining_s: float | None = None  # a running job's: its own ETA (or estimate less elapsed)

    def name(self) -> str:
        """What the job makes, short: its progress label, else its log path without logs/ and .log."""
        if self.progress and self.progress.get("label"):
            return self.progress["label"].removeprefix("ewa ")
        if self.log:
            return self.log.removeprefix("logs/").removesuffix(".log")
        return f"{self.rule} {self.outputs[0]}"


@dataclass
class Estimate:
    per_job_s: dict[str, float | None] = field(default_factory=dict)  # by rule
    source: dict[str, str] = field(default_factory=dict)  # by rule: measured, plan x<c>, none
    correction: float | None = None  # measured / planned, the median over rules that have both
    slots: int = 1
    eta_s: float | None = None
    unknown: dict[str, int] = field(default_factory=dict)  # rule -> jobs left without an estimate


def workdir_of(path: str | os.PathLike) -> Path:
    """The workflow directory: DIR, or the directory above it when DIR is a results/ directory."""
    path = Path(path).resolve()
    if path.name == "results" and not (path / "results").is_dir():
        return path.parent
    return path


def default_snakefile(root: Path) -> Path:
    if (root / "Snakefile").is_file():
        return root / "Snakefile"
    return Path(__file__).resolve().parents[2] / "Snakefile"  # the checkout ewa runs from


def dag_jobs(root: Path, snakefile: Path, configfile: str | None, profile: str | None,
             targets: list[str]) -> list["Job"]:
    """Every job of the run's DAG, done or not, from Snakemake's own dry run of it (`snakemake -n
    --forceall`: rule, inputs, outputs and log of each job). It locks nothing: a run may hold the directory."""
    cmd = [sys.executable, "-m", "snakemake", "-n", "--forceall", "--snakefile", str(snakefile),
           "--directory", str(root), "--cores", "1", "--nolock", "--ignore-incomplete"]
    if configfile:
        cmd += ["--configfile", str(Path(configfile).resolve())]
    if profile:
        cmd += ["--profile", str(Path(profile).resolve())]
    done = subprocess.run([*cmd, *targets], capture_output=True, text=True, cwd=root)
    text = done.stdout + done.stderr
    if done.returncode != 0:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        why = next((line for line in lines if "Error" in line), lines[-1] if lines else "no output")
        raise UserError(f"snakemake -n in {root} failed: {why}")
    return parse_dry_run(text)


def parse_dry_run(text: str) -> list["Job"]:
    """The jobs of a dry run's listing (rule blocks with input:, output:, log: lines), rule all left out."""
    jobs, job = [], None
    for line in text.splitlines():
        head = line.strip()
        if line and not line[0].isspace():
            job = None
            if (head.startswith("rule ") or head.startswith("localrule ")) and head.endswith(":"):
                rule = head.split(" ", 1)[1][:-1]
                if rule != "all":
                    job = Job(rule, [], None, True)
                    jobs.append(job)
            continue
        if job is None:
            continue
        key, _, value = head.partition(": ")
        if key in ("input", "output", "log"):
            paths = [v.strip() for v in value.split(", ") if v.strip()]
            if key == "input":
                job.inputs = paths
            elif key == "output":
                job.outputs = paths
            else:
                job.log = paths[0] if paths else None
    return jobs


def mark_done(jobs: list["Job"], root: Path, incomplete: dict[str, float]) -> None:
    """A job is done when every output exists and none is marked incomplete; or, outputs gone, when every job
    that reads one is done (a temporary output Snakemake deleted once used, as merged models)."""
    for job in jobs:
        job.to_run = not all((root / o).exists() and o not in incomplete for o in job.outputs)
    readers: dict[str, list[Job]] = {}
    for job in jobs:
        for path in job.inputs:
            readers.setdefault(path, []).append(job)
    changed = True
    while changed:
        changed = False
        for job in jobs:
            users = [r for o in job.outputs for r in readers.get(o, [])]
            if job.to_run and users and all(not u.to_run for u in users):
                job.to_run, changed = False, True


def progress_files(root: Path) -> dict[str, dict]:
    """Output path (relative, as the rules name it: results/...) -> that job's progress record."""
    base = root / PROGRESS_DIR
    found = {}
    if base.is_dir():
        for path in base.rglob("*.json"):
            record = read_progress(path)
            if record is not None:
                found["results/" + str(path.relative_to(base))[:-len(".json")]] = record
    return found


def incomplete_outputs(root: Path) -> dict[str, float]:
    """Outputs Snakemake marked incomplete, with when: jobs a run started and did not finish (running, or
    killed)."""
    base = root / ".snakemake" / "incomplete"
    found = {}
    if base.is_dir():
        for path in base.rglob("*"):
            if path.is_file() and path.name != "migration_underway":
                b64 = "".join(part.removeprefix("@") for part in path.relative_to(base).parts)
                try:
                    found[base64.urlsafe_b64decode(b64.encode()).decode()] = path.stat().st_mtime
                except (ValueError, UnicodeDecodeError, OSError):
                    continue
    return found


def last_run_start(root: Path) -> float:
    """When the newest Snakemake run in `root` started (its log's name is its start time); 0 without one."""
    starts = []
    for log in (root / ".snakemake" / "log").glob("*.snakemake.log"):
        try:
            starts.append(time.mktime(time.strptime(log.name.split(".")[0], "%Y-%m-%dT%H%M%S")))
        except ValueError:
            continue
    return max(starts, default=0.0)


def locked(root: Path) -> bool:
    """Whether a Snakemake run holds the directory (or a killed one left its lock behind)."""
    locks = root / ".snakemake" / "locks"
    return locks.is_dir() and any(locks.iterdir())


def snakemake_here(root: Path) -> bool:
    """Whether a Snakemake process on this host works in `root` (its main process: cwd or --directory)."""
    import psutil

    for proc in psutil.process_iter(["cmdline", "cwd"]):
        try:
            cmdline = proc.info["cmdline"] or []
            if not any("snakemake" in Path(part).name for part in cmdline[:3]) or "-n" in cmdline:
                continue
            where = Path(cmdline[cmdline.index("--directory") + 1]) if "--directory" in cmdline else proc.info["cwd"]
            if where and Path(where).resolve() == root:
                return True
        except (psutil.Error, OSError, ValueError, IndexError):
            continue
    return False


def liveness(record: dict, now: float, stale_s: float = STALE_S) -> tuple[str, str | None]:
    """A progress record's state now: (running | done | failed | killed, why)."""
    state = record.get("state")
    if state == DONE:
        return DONE, None
    if state == FAILED:
        return FAILED, record.get("error") or "failed"
    age = now - float(record.get("heartbeat") or 0)
    if record.get("host") == socket.gethostname() and not pid_alive(int(record.get("pid") or 0)):
        return KILLED, f"process {record.get('pid')} on {record.get('host')} is gone (last heartbeat {duration(age)} ago)"
    if age > stale_s:
        return KILLED, f"no heartbeat for {duration(age)} (pid {record.get('pid')} on {record.get('host')})"
    return RUNNING, None


def classify(jobs: list[Job], records: dict[str, dict], incomplete: dict[str, float], in_flight: bool, now: float,
             stale_s: float = STALE_S, run_start: float = 0.0) -> None:
    """Each job's state from what Snakemake would build, its progress file and Snakemake's markers (a marker
    from before the run in flight started is a job an earlier run left: killed, to be run again)."""
    for job in jobs:
        record = next((records[o] for o in job.outputs if o in records), None)
        job.progress = record
        if not job.to_run:
            job.state = "done"
            continue
        if record is not None:
            state, why = liveness(record, now, stale_s)
            if state in (RUNNING, FAILED, KILLED):
                job.state, job.why = state, why
                continue
        marks = [incomplete[o] for o in job.outputs if o in incomplete]
        if marks:
            now_running = in_flight and max(marks) >= run_start - 1
            job.state = RUNNING if now_running else KILLED
            job.why = None if now_running else "started by a run that ended without finishing it (Snakemake's incomplete marker)"


def measured_per_job(jobs: list[Job]) -> dict[str, float]:
    """Seconds per job of each rule in this run: its finished jobs' mean, else its running jobs' mean of
    elapsed time plus ETA."""
    done, projected = {}, {}
    for job in jobs:
        p = job.progress
        if not p:
            continue
        if p.get("state") == DONE and p.get("elapsed_s") is not None:
            done.setdefault(job.rule, []).append(float(p["elapsed_s"]))
        elif job.state == RUNNING and p.get("eta_s") is not None:
            projected.setdefault(job.rule, []).append(float(p["elapsed_s"]) + float(p["eta_s"]))
    out = {rule: statistics.fmean(v) for rule, v in projected.items()}
    out.update({rule: statistics.fmean(v) for rule, v in done.items()})
    return out


def eta(jobs: list[Job], measured: dict[str, float], planned: dict[str, float], slots: int | None = None,
        now: float | None = None) -> Estimate:
    """The time until every job is done.

    Per rule, seconds per job: measured in this run where it can be, else the plan's (`planned`, seconds per
    job) times the correction, the median over rules that have both of measured / planned (1 without any).
    Work left: each running job's own ETA (else its rule's time less what it ran), plus each pending (or
    failed, to be run again) job's time. Run `slots` jobs at a time (default: as many as run now, at least
    one): ETA = max(the longest running job's remainder, work left / slots). A rule with neither a measured
    nor a planned time is left out and named.
    """
    est = Estimate()
    ratios = [measured[r] / planned[r] for r in measured if planned.get(r)]
    est.correction = statistics.median(ratios) if ratios else None
    for rule in dict.fromkeys(j.rule for j in jobs):
        if rule in measured:
            est.per_job_s[rule], est.source[rule] = measured[rule], "measured"
        elif planned.get(rule):
            c = est.correction or 1.0
            est.per_job_s[rule], est.source[rule] = planned[rule] * c, f"plan x{c:.2g}"
        else:
            est.per_job_s[rule], est.source[rule] = None, "none"
    running = [j for j in jobs if j.state == RUNNING]
    est.slots = slots or max(1, len(running))
    left, longest = 0.0, 0.0
    for job in jobs:
        if job.state == "done":
            continue
        per_job = est.per_job_s.get(job.rule)
        if job.state == RUNNING:
            p = job.progress or {}
            if p.get("eta_s") is not None:
                remaining = float(p["eta_s"])
            elif per_job is not None:
                remaining = max(0.0, per_job - float(p.get("elapsed_s") or 0.0))
            else:
                remaining = None
            job.remaining_s = remaining
            if remaining is not None:
                longest = max(longest, remaining)
        else:
            remaining = per_job
        if remaining is None:
            est.unknown[job.rule] = est.unknown.get(job.rule, 0) + 1
        else:
            left += remaining
    counted = sum(1 for j in jobs if j.state != "done") - sum(est.unknown.values())
    est.eta_s = max(longest, left / est.slots) if counted else None
    return est


def planned_seconds(configfile: Path, profile: str | None) -> tuple[dict[str, float], str | None]:
    """`ewa plan`'s hours per job, as seconds by rule (only rules it gives hours for), or why there are none."""
    from ewa.plan.cli import plan_inputs
    from ewa.plan.estimate import plan_rules
    from ewa.plan.memory import MAX_MEMORY_SHARE
    from ewa.plan.workload import PROMPT_TOKENS

    args = argparse.Namespace(configfile=str(configfile), profile=profile, model_config=None,
                              prompt_tokens=PROMPT_TOKENS, problems=[], alphas_at_once=None,
                              max_memory_share=MAX_MEMORY_SHARE, families=None)
    try:
        rules = plan_rules(plan_inputs(args))
    except (ValueError, OSError) as e:  # UserError included: a plan that cannot be made is a note, not a stop
        return {}, str(e).splitlines()[0] if str(e) else type(e).__name__
    return {name: r.hours * 3600 for name, r in rules.items() if r.hours}, None


def running_line(job: Job) -> str:
    """A running job in one line: a trainer's last logging step, else done of total with rates and ETA."""
    p = job.progress or {}
    info = p.get("info") or {}
    if info.get("line"):
        text = info["line"]
    elif p:
        total = f"/{p['total']}" if p.get("total") is not None else ""
        share = f" ({p['done'] / p['total']:.0%})" if p.get("total") else ""
        rates = ", ".join(f"{number(v)} {k}" for k, v in (p.get("rates") or {}).items() if v)
        text = f"{p.get('done', 0)}{total} {p.get('unit', '')}{share}" + (f" | {rates}" if rates else "")
    else:
        text = "no progress file yet (or a job that keeps none)"
    when = f"{duration(p.get('elapsed_s'))} in" if p else ""
    eta_text = f"ETA {duration(job.remaining_s)}" if job.remaining_s is not None else "ETA ?"
    return f"{text} | {when + ', ' if when else ''}{eta_text}"


def status(root: Path, configfile: str | None = None, profile: str | None = None, snakefile: str | None = None,
           targets: list[str] | None = None, slots: int | None = None, now: float | None = None,
           stale_s: float = STALE_S, plan: bool = True) -> dict:
    """The run in `root` as a dict (what --json prints)."""
    root = workdir_of(root)
    if not root.is_dir():
        raise UserError(f"{root}: no such directory")
    now = time.time() if now is None else now
    snakefile = Path(snakefile) if snakefile else default_snakefile(root)
    jobs = dag_jobs(root, snakefile, configfile, profile, targets or [])
    records, incomplete = progress_files(root), incomplete_outputs(root)
    mark_done(jobs, root, incomplete)
    # a run holds the directory (a killed run leaves its lock behind): one of its jobs is alive, or its
    # Snakemake runs on this host
    in_flight = locked(root) and (any(liveness(r, now, stale_s)[0] == RUNNING for r in records.values())
                                  or snakemake_here(root))
    classify(jobs, records, incomplete, in_flight, now, stale_s, last_run_start(root))
    config_path = Path(configfile) if configfile else root / "config.yaml"
    measured = measured_per_job(jobs)
    # the plan (seconds to build for the bundled problem sets) only where a rule left has no measured time
    planned, plan_note = {}, None
    if plan and any(j.state != "done" and j.rule in PLANNED_RULES and j.rule not in measured for j in jobs):
        planned, plan_note = planned_seconds(config_path, profile) if config_path.is_file() else ({}, "no config file")
    est = eta(jobs, measured, planned, slots)
    rules: dict[str, dict] = {}
    for job in jobs:
        counts = rules.setdefault(job.rule, {"done": 0, "running": 0, "failed": 0, "pending": 0, "total": 0})
        counts["failed" if job.state in (FAILED, KILLED) else job.state] += 1
        counts["total"] += 1
    left = sum(1 for j in jobs if j.state != "done")
    run_state = ("finished" if not left else "running" if any(j.state == RUNNING for j in jobs)
                 else "stopped")
    return {
        "directory": str(root), "configfile": str(config_path), "state": run_state, "time": now,
        "rules": rules, "jobs_left": left,
        "running": [{"rule": j.rule, "name": j.name(), "outputs": j.outputs, "log": j.log, "line": running_line(j),
                     "remaining_s": j.remaining_s, "progress": j.progress} for j in jobs if j.state == RUNNING],
        "failed": [{"rule": j.rule, "name": j.name(), "state": j.state, "why": j.why, "outputs": j.outputs,
                    "log": j.log} for j in jobs if j.state in (FAILED, KILLED)],
        "eta_s": None if not left else est.eta_s, "eta": {
            "per_job_s": est.per_job_s, "source": est.source, "correction": est.correction, "slots": est.slots,
            "without_estimate": est.unknown, "plan_note": plan_note, "planned_s": planned},
    }


def render(s: dict) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s["time"]))
    lines = [f"ewa status: {s['directory']} ({Path(s['configfile']).name}): {s['state']}, {when}", "",
             f"{'rule':<16}{'done':>6}{'running':>9}{'failed':>8}{'pending':>9}{'total':>7}"]
    for rule, c in s["rules"].items():
        cells = [c[k] or "-" for k in ("done", "running", "failed", "pending")]
        lines.append(f"{rule:<16}{cells[0]:>6}{cells[1]:>9}{cells[2]:>8}{cells[3]:>9}{c['total']:>7}")
    if s["running"]:
        lines += ["", "running:"]
        lines += [f"  {r['name']}: {r['line']}" for r in s["running"]]
    if s["failed"]:
        lines += ["", "failed or killed:"]
        for f in s["failed"]:
            lines.append(f"  {f['name']}: {f['state']}: {f['why']}" + (f" (log: {f['log']})" if f["log"] else ""))
    lines.append("")
    e = s["eta"]
    if s["eta_s"] is None:
        lines.append("nothing left to run" if s["state"] == "finished" else "ETA: unknown")
    else:
        sources = "; ".join(f"{rule} {duration(sec)} ({e['source'][rule]})" for rule, sec in e["per_job_s"].items()
                            if sec is not None)
        unknown = ", ".join(f"{rule} ({n})" for rule, n in e["without_estimate"].items())
        uncounted = sum(e["without_estimate"].values())
        counted = f"{s['jobs_left'] - uncounted} of {s['jobs_left']}" if uncounted else f"{s['jobs_left']}"
        lines.append(f"ETA: {duration(s['eta_s'])} for {counted} jobs left, {e['slots']} at a time"
                     + ("" if s["state"] == "running" else " (nothing runs now: the time once the run is restarted)"))
        if sources:
            lines.append(f"  per job: {sources}")
        if unknown:
            lines.append(f"  not counted (no time measured or planned yet): {unknown}")
    return "\n".join(lines)


def add_status_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("directory", nargs="?", default=".", help="the workflow directory of the run (or its results/)")
    p.add_argument("--configfile", metavar="FILE", help="the run's --configfile (default: DIR/config.yaml)")
    p.add_argument("--profile", metavar="DIR", help="the run's Snakemake profile (its merge chunks; the plan's machines)")
    p.add_argument("--snakefile", metavar="FILE", help="default: DIR/Snakefile, else this checkout's")
    p.add_argument("--target", dest="targets", action="append", default=[], metavar="RULE|FILE",
                   help="what the run builds (default: rule all; e.g. science_all for make science)")
    p.add_argument("--jobs", type=int, metavar="N", help="jobs at a time for the ETA (default: as many as run now)")
    p.add_argument("--no-plan", dest="plan", action="store_false",
                   help="no `ewa plan` for rules without a measured time yet (it counts the bundled problem sets)")
    p.add_argument("--json", action="store_true", help="print the status as JSON")


def status_command(args: argparse.Namespace, _config: dict) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs: expected a whole number >= 1, got {args.jobs}")
    s = status(Path(args.directory), args.configfile, args.profile, args.snakefile, args.targets, args.jobs,
               plan=args.plan)
    print(json.dumps(s, indent=2, default=str) if args.json else render(s))
    return 0


COMMANDS = {"status": (add_status_arguments, status_command)}
