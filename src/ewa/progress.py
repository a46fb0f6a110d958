"""Progress of a long job (init, train, merge, sample, evaluate): one plain line on stderr at a steady
interval, readable in a SLURM log, and a small JSON file that `ewa status` reads while the job runs and
after it ended.

A line is printed when the work starts (at its first update: a job stopped by bad input says only its
error), then whenever both 30 s (`EWA_PROGRESS_INTERVAL`) and a tenth of the work have passed since the
last one (whichever is rarer), and at the end:

    ewa sample alpha+0.50 lcb_hard/reasoning: 40/72 problems (56%) | 0.52 problems/s, 4.1 samples/s, 310 tokens/s | 1m17s, ETA 1m02s

The progress file of an output under a `results/` directory is `logs/progress/<its path under results/>.json`
beside that `results/` (`progress_path`), so `ewa status` finds every job's from the workflow directory; it
is never an output of a rule, and nothing in results/ changes. While the job lives, a thread rewrites it every
HEARTBEAT_S seconds: a heartbeat older than a few of those, or a process gone on the same host, is a killed job.
Printing and the file change nothing the job computes or writes.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, TextIO

INTERVAL_S = 30.0  # at least this long between two lines ...
STEP_SHARE = 0.10  # ... and at least this share of the work
HEARTBEAT_S = 15.0  # the progress file is rewritten at least this often while the job lives
SAVE_EVERY_S = 1.0  # ... and at most this often by updates: a shared filesystem pays for each rewrite
STALE_S = 120.0  # `ewa status`: a running job whose heartbeat is older than this has been killed
FILE_VERSION = 1
RUNNING, DONE, FAILED = "running", "done", "failed"
UMASK = os.umask(0o022)  # read once (os.umask sets it): the mode an ordinary file gets here
os.umask(UMASK)
_ACTIVE: list["Progress"] = []  # started and not yet ended in this process, innermost last


def current() -> "Progress | None":
    """The innermost job progress this process has started and not ended (a trainer inside `ewa init`
    reports on its job's)."""
    return _ACTIVE[-1] if _ACTIVE else None


def interval_s() -> float:
    """The least time between two lines: INTERVAL_S, or EWA_PROGRESS_INTERVAL (seconds) where set."""
    try:
        return max(0.0, float(os.environ.get("EWA_PROGRESS_INTERVAL", INTERVAL_S)))
    except ValueError:
        return INTERVAL_S


def results_root(path: str | os.PathLike) -> tuple[Path, Path] | None:
    """(the directory holding `results/`, `path` relative to that `results/`) for a path inside a
    `results/` directory (the innermost one), else None.

    >>> results_root("/w/results/seed0/samples/a.jsonl")
    (PosixPath('/w'), PosixPath('seed0/samples/a.jsonl'))
    >>> results_root("/tmp/out/a.jsonl") is None
    True
    """
    parts = Path(os.path.abspath(path)).parts
    inside = [i for i, part in enumerate(parts[:-1]) if part == "results"]
    if not inside:
        return None
    return Path(*parts[:inside[-1]]), Path(*parts[inside[-1] + 1:])


def side_path(out: str | os.PathLike, kind: str, suffix: str = "") -> Path | None:
    """Where a job keeps a side file of `kind` for `out`: `logs/<kind>/<out under results/><suffix>` beside
    the workflow's results/ (None for an output elsewhere, a run by hand).

    >>> side_path("/w/results/seed0/checkpoints/high", "progress", ".json")
    PosixPath('/w/logs/progress/seed0/checkpoints/high.json')
    """
    located = results_root(out)
    if located is None:
        return None
    root, rel = located
    return root / "logs" / kind / f"{rel}{suffix}"


def progress_path(out: str | os.PathLike) -> Path | None:
    """The progress file of the job that writes `out` (None outside a results/ directory)."""
    return side_path(out, "progress", ".json")


def duration(seconds: float | None) -> str:
    """A short duration: 45s, 3m07s, 2h05m, 1d03h.

    >>> [duration(s) for s in (4.2, 187, 7500, 97200)]
    ['4s', '3m07s', '2h05m', '1d03h']
    """
    if seconds is None:
        return "?"
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def number(x: float) -> str:
    """A rate as a person reads it: 3 significant figures, no exponent for the usual range.

    >>> [number(x) for x in (0.01234, 4.1, 310.4, 12345.6)]
    ['0.0123', '4.1', '310', '12,346']
    """
    if x >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def write_atomic(path: Path, obj: dict) -> None:
    """The JSON object at `path`, whole or not at all (a temporary in the same directory, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~UMASK)  # mkstemp's 0600 would hide the file from a colleague's `ewa status`
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1, sort_keys=True, default=str)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_progress(path: str | os.PathLike) -> dict | None:
    """A progress file, or None when it is not one (being replaced, or from something else)."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("version") == FILE_VERSION else None


class Progress:
    """done of total for one job, with rates per second of `unit` and of each counter in `counters`
    (name -> unit, e.g. {"tokens": "tokens"}), an ETA, lines at a steady interval and a progress file.

    `out` is the job's output (its progress file comes from it; None: no file), `label` what the lines
    start with. Use as a context manager: a job that raises ends as failed, with the error in its file.
    """

    def __init__(self, job: str, total: int | None, unit: str, *, out: str | os.PathLike | None = None,
                 label: str | None = None, counters: dict[str, str] | None = None, initial: int = 0,
                 stream: TextIO | None = None, interval: float | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time):
        self.job, self.total, self.unit = job, total, unit
        self.label = label or f"ewa {job}"
        self.out = None if out is None else str(out)
        self.path = progress_path(out) if out is not None else None
        self.host = socket.gethostname()
        self.saved_at = None
        self.counters = dict(counters or {})
        self.counts = {name: 0.0 for name in self.counters}
        self.initial = self.done = initial
        self.stream = stream
        self.interval = interval_s() if interval is None else interval
        self.clock, self.wall = clock, wall
        self.info: dict = {}
        self.state, self.error = RUNNING, None
        self.started = self.last_line_at = self.rate_from = None  # rates count from rate_from (restart())
        self.last_line_done = initial
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started_wall = None
        self.announced = False

    # -- what the job calls ----------------------------------------------------------------------------

    def start(self, heartbeat: bool = True) -> "Progress":
        """Starts the clock and the file; the first line waits for the first update, so a job that stops on
        bad input before doing anything says only its one error line."""
        self.started = self.last_line_at = self.rate_from = self.clock()
        self.started_wall = self.wall()
        self.announced = False
        self.save()
        _ACTIVE.append(self)
        if heartbeat and self.path is not None:
            self._thread = threading.Thread(target=self._beat, name="ewa-progress", daemon=True)
            self._thread.start()
        return self

    def update(self, advance: int = 0, *, done: int | None = None, total: int | None = None,
               info: dict | None = None, line: str | None = None, **counts: float) -> None:
        """`advance` more done (or `done` in all), counters advanced by `counts`, `info` merged into the
        file's. `line`: print this line now (a trainer's logging step) instead of waiting for the interval."""
        if not self.announced:  # the start line, once the job is under way
            self.announced = True
            self.emit(self.line())
        with self._lock:
            self.done = done if done is not None else self.done + advance
            if total is not None:
                self.total = total
            for name, n in counts.items():
                self.counts[name] = self.counts.get(name, 0.0) + n
            if info:
                self.info.update(info)
        if line is not None:
            self.emit(line)
            self.last_line_at, self.last_line_done = self.clock(), self.done
        elif self.due():
            self.emit(self.line())
            self.last_line_at, self.last_line_done = self.clock(), self.done
        elif self.saved_at is not None and self.clock() - self.saved_at < SAVE_EVERY_S:
            return  # a job updating per sample rewrites its file at most once a second; the heartbeat in between
        self.save()

    def restart_rates(self, done: int) -> None:
        """Rates and ETA from now on, counting from `done` (a trainer's first step, after loading models)."""
        with self._lock:
            self.rate_from, self.initial = self.clock(), done
            self.counts = {name: 0.0 for name in self.counts}

    def finish(self) -> None:
        self.state = DONE
        self._end()
        self.emit(self.line())

    def fail(self, error: BaseException | str) -> None:
        self.state, self.error = FAILED, (str(error).splitlines() or [type(error).__name__])[0][:300]
        self._end()

    def __enter__(self) -> "Progress":
        return self.start() if self.started is None else self

    def __exit__(self, kind, error, tb) -> None:
        if error is None:
            self.finish()
        else:
            self.fail(error if str(error) else kind.__name__)

    # -- arithmetic ------------------------------------------------------------------------------------

    def elapsed(self) -> float:
        return 0.0 if self.started is None else self.clock() - self.started

    def rates(self) -> dict[str, float]:
        """Per second of this run (a resumed job's earlier work not counted): the unit's, then each counter's."""
        elapsed = 0.0 if self.rate_from is None else self.clock() - self.rate_from
        if elapsed <= 0:
            return {}
        rates = {f"{self.unit}/s": (self.done - self.initial) / elapsed}
        rates.update({f"{unit}/s": self.counts[name] / elapsed for name, unit in self.counters.items()})
        return rates

    def eta(self) -> float | None:
        """Seconds left at this run's rate so far; None before anything was done."""
        if self.total is None:
            return None
        if self.done >= self.total:
            return 0.0
        rate = self.rates().get(f"{self.unit}/s", 0.0)
        return (self.total - self.done) / rate if rate > 0 else None

    def due(self) -> bool:
        """Whether a line is due: both the interval and a tenth of the work since the last one."""
        if self.clock() - self.last_line_at < self.interval:
            return False
        if not self.total:
            return True
        return (self.done - self.last_line_done) >= STEP_SHARE * self.total

    # -- output --------------------------------------------------------------------------------------

    def line(self) -> str:
        total = f"/{self.total}" if self.total is not None else ""
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        head = f"{self.label}: {'done ' if self.state == DONE else ''}{self.done}{total} {self.unit}{share}"
        if self.started is None or self.elapsed() <= 0 or (self.done == self.initial and self.state != DONE):
            return head + " | starting"
        rates = ", ".join(f"{number(v)} {k}" for k, v in self.rates().items())
        when = (f"in {duration(self.elapsed())}" if self.state == DONE
                else f"{duration(self.elapsed())}, ETA {duration(self.eta())}")
        return f"{head} | {rates} | {when}"

    def emit(self, text: str) -> None:
        stream = self.stream or sys.stderr
        print(text, file=stream, flush=True)

    def record(self) -> dict:
        with self._lock:
            return {
                "version": FILE_VERSION, "job": self.job, "label": self.label, "output": self.out,
                "host": self.host, "pid": os.getpid(), "state": self.state, "error": self.error,
                "started": self.started_wall, "heartbeat": self.wall(), "elapsed_s": round(self.elapsed(), 3),
                "done": self.done, "initial": self.initial, "total": self.total, "unit": self.unit,
                "rates": {k: round(v, 6) for k, v in self.rates().items()},
                "eta_s": None if (eta := self.eta()) is None else round(eta, 3), "info": dict(self.info),
            }

    def save(self) -> None:
        self.saved_at = self.clock()
        if self.path is None:
            return
        try:
            write_atomic(self.path, self.record())
        except OSError:  # a side file: a full or read-only logs/ never stops the job
            pass

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            self.save()

    def _end(self) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.save()


def trainer_callback(progress: Progress, describe: Callable[[dict, int, int], str]):
    """A transformers TrainerCallback that turns each logging step into one line (`describe(logs, step,
    max_steps)` plus the progress's rate and ETA) and the progress file's step, total and last logs, in
    place of the trainer's raw dictionaries (remove PrinterCallback and ProgressCallback beside it)."""
    from transformers import TrainerCallback

    class ProgressCallback(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            if not state.is_world_process_zero:
                return
            progress.restart_rates(state.global_step)  # a resumed run's rate counts only its own steps
            progress.update(done=state.global_step, total=state.max_steps)

        def on_log(self, args, state, control, logs=None, **kwargs):
            # the end-of-training summary (runtime, mean loss) is left to the job's last line
            if not state.is_world_process_zero or not logs or "train_runtime" in logs:
                return
            numbers = {k: v for k, v in logs.items() if isinstance(v, (int, float))}
            text = describe(numbers, state.global_step, state.max_steps)
            progress.update(done=state.global_step, total=state.max_steps, info={"last": numbers, "line": text},
                            line=f"{progress.label}: {text}{timing(progress)}")

        def on_step_end(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                progress.update(done=state.global_step)

    return ProgressCallback()


def timing(progress: Progress) -> str:
    """' | 0.21 steps/s, ETA 3m10s' (nothing before a step of this run is done)."""
    rate = progress.rates().get(f"{progress.unit}/s")
    if not rate:
        return ""
    return f" | {number(rate)} {progress.unit}/s, ETA {duration(progress.eta())}"


def quiet_bars() -> None:
    """No tqdm bars from `datasets` and `transformers` (tokenizing rows, loading and writing weights): in a
    log file they are long lines of carriage returns, and the job's own lines say how far it is."""
    import importlib

    for module in ("datasets.utils.logging", "transformers.utils.logging"):
        try:
            importlib.import_module(module).disable_progress_bar()
        except ImportError:
            pass


def quiet_trainer(trainer) -> None:
    """Remove transformers' printing of raw log dictionaries and its tqdm bar (the progress callback says
    the same in one line per logging step)."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for callback in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(callback)
