"""Sandbox backends, registered by the name `sandbox.backend` uses; each builds the command that
starts one fork server (ewa.sandbox.forkserver) for one worker, and cleans up after a dead one."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

from ewa.sandbox import forkserver

SERVER_SOURCE = Path(forkserver.__file__).read_text()
# Paths the bwrap sandbox always hides (a tmpfs over each that exists): homes and runtime secrets.
HIDDEN = ("/root", "/home", "/run", "/var/tmp", "/mnt", "/media", "/srv")
# Never hidden, nor anything inside or above them, whatever the settings say: Python needs them.
SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/dev", "/proc", "/sys", "/tmp")


@dataclass(frozen=True)
class SandboxSettings:
    """The `sandbox` config section."""
    backend: str | None = None  # bwrap | docker | process; None or "auto": default_backend()
    workers: int = 0  # fork servers; 0 means one per core
    python: str | None = None  # the lean interpreter that runs model code (not the venv); None: the config default
    uid: int | None = None  # worker i runs as uid - i; None: a block of uids no other live sandbox holds
    hide: tuple[str, ...] = ()  # more host paths to hide in the bwrap sandbox
    tmp_size_mb: int = 256  # size of the sandbox's private /tmp (and /dev/shm)
    max_processes: int = 32  # RLIMIT_NPROC for a candidate (processes and threads)
    output_limit_mb: int = 64  # stdout/stderr/file size beyond which a test is cut off
    float_tol: float = 1e-6  # relative and absolute tolerance when comparing floats
    docker_image: str | None = None  # scripts/docker-sandbox-image.sh builds it; None: the config default
    docker_python: str = "/usr/bin/python3"
    docker_memory_mb: int = 2048  # whole-container backstop; per-test limits are rlimits inside
    docker_pids_limit: int = 256

    def __post_init__(self):
        # The keys the experiment config also names take their defaults from its schema, the one source.
        from ewa.config import section

        defaults = section("sandbox")
        for key in ("python", "docker_image"):
            if getattr(self, key) is None:
                object.__setattr__(self, key, defaults[key])


BACKENDS: dict[str, type["Backend"]] = {}


def register(cls):
    BACKENDS[cls.name] = cls
    return cls


def sandbox_env(workdir: str) -> dict[str, str]:
    """The whole environment model code sees: nothing inherited, so no tokens or keys leak in."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "HOME": workdir, "TMPDIR": workdir, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}


def drop_privileges(uid: int) -> list[str]:
    """Become `uid` with no capabilities at all; only possible (and only needed) when we are root."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs"]


class Backend:
    name = ""
    isolated = True  # False: rlimits only, model code can see and touch the host
    scratch = ("/tmp",)  # directories the fork server empties after every test

    def __init__(self, settings: SandboxSettings):
        self.settings = settings

    def available(self) -> bool:
        return True

    def uid(self, index: int) -> int:
        if self.settings.uid is not None:
            return self.settings.uid - index
        return claim_uid_block() - index

    def server(self, python: str) -> list[str]:
        scratch = [a for d in self.scratch for a in ("--scratch", d)]
        return [python, "-s", "-B", "-c", SERVER_SOURCE, *scratch]

    def command(self, index: int) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return sandbox_env(self.scratch[0])

    def popen_env(self) -> dict[str, str]:
        """Environment of the process we start (the sandbox itself, or a client that starts it)."""
        return self.env()

    def cleanup(self, index: int, started_at: float) -> None:
        """Called after a worker died; kill anything it left behind."""


@register
class Bwrap(Backend):
    """bubblewrap: no network, read-only root, private /tmp, /dev and /proc, no capabilities."""
    name = "bwrap"
    scratch = ("/tmp", "/dev/shm")

    def available(self) -> bool:
        return bwrap_works(self.settings.python)

    def hidden_paths(self) -> list[str]:
        """Homes, runtime secrets and this project (its data holds expected outputs)."""
        project = Path(__file__).resolve().parents[3]
        paths = [*HIDDEN, *self.settings.hide, os.getcwd(), str(project), sys.prefix]
        python = Path(self.settings.python)
        system = {os.path.realpath(p) for p in SYSTEM} | {str(python.parent), str(python.resolve().parent)}

        def essential(p: str) -> bool:
            return p == "/" or any(p == s or p.startswith(s + "/") or s.startswith(p + "/") for s in system)

        out = []
        for p in sorted({os.path.realpath(p) for p in paths if os.path.exists(p)}):
            if not essential(p) and not any(p.startswith(o + "/") for o in out):
                out.append(p)
        return out

    def command(self, index: int) -> list[str]:
        size = str(self.settings.tmp_size_mb << 20)
        cmd = ["bwrap", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
               "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--hostname", "sandbox",
               "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
               "--perms", "1777", "--size", size, "--tmpfs", "/tmp",
               "--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]
        for p in self.hidden_paths():
            cmd += ["--tmpfs", p] if os.path.isdir(p) else ["--ro-bind", "/dev/null", p]
        if os.geteuid() != 0:  # unprivileged bwrap: a user namespace, capabilities dropped inside it
            cmd += ["--unshare-user", "--cap-drop", "ALL"]
        cmd += ["--chdir", "/tmp", "--clearenv"]
        for k, v in self.env().items():
            cmd += ["--setenv", k, v]
        return [*cmd, "--", *drop_privileges(self.uid(index)), *self.server(self.settings.python)]


@register
class Docker(Backend):
    """`docker run -i` per worker: no network, read-only image, memory and pids capped by the engine."""
    name = "docker"
    scratch = ("/tmp", "/dev/shm")

    def __init__(self, settings: SandboxSettings):
        super().__init__(settings)
        self.names: dict[int, str] = {}

    def available(self) -> bool:
        return shutil.which("docker") is not None

    def command(self, index: int) -> list[str]:
        s = self.settings
        self.names[index] = name = f"ewa-sandbox-{os.getpid()}-{index}-{uuid.uuid4().hex[:8]}"
        # --pull never: images are built locally; nothing is fetched from a registry at run time.
        cmd = ["docker", "run", "-i", "--rm", "--pull", "never", "--name", name, "--network", "none", "--read-only",
               "--tmpfs", f"/tmp:rw,nosuid,nodev,size={s.tmp_size_mb}m,mode=1777",
               "--memory", f"{s.docker_memory_mb}m", "--memory-swap", f"{s.docker_memory_mb}m",
               "--pids-limit", str(s.docker_pids_limit), "--cap-drop", "ALL",
               "--security-opt", "no-new-privileges", "--user", f"{self.uid(index)}:{self.uid(index)}",
               "--workdir", "/tmp"]
        for k, v in self.env().items():
            cmd += ["--env", f"{k}={v}"]
        return [*cmd, s.docker_image, *self.server(s.docker_python)]

    def env(self) -> dict[str, str]:
        return sandbox_env("/tmp")

    def popen_env(self) -> dict[str, str]:
        return dict(os.environ)  # the docker client needs DOCKER_HOST etc.; the container gets env()

    def cleanup(self, index: int, started_at: float) -> None:
        if index in self.names:
            subprocess.run(["docker", "rm", "-f", self.names[index]], capture_output=True, timeout=60)


@register
class Process(Backend):
    """rlimits (and, as root, a dedicated uid) only: for machines with neither bwrap nor Docker."""
    name = "process"
    isolated = False
    scratch = ("auto",)

    def __init__(self, settings: SandboxSettings):
        super().__init__(settings)
        self.scratch_dirs: dict[int, str] = {}
        warn_not_isolated()

    def command(self, index: int) -> list[str]:
        # The worker's working directory, emptied after every test; made here so that we can
        # remove it even when a candidate kills the worker.
        self.scratch_dirs[index] = scratch = tempfile.mkdtemp(prefix="ewa-sandbox-")
        if os.geteuid() == 0:
            os.chown(scratch, self.uid(index), self.uid(index))
        server = self.server(self.settings.python)
        return [*drop_privileges(self.uid(index)), *server[:server.index("--scratch")], "--scratch", scratch]

    def env(self) -> dict[str, str]:
        return sandbox_env("/tmp")

    def cleanup(self, index: int, started_at: float) -> None:
        if os.geteuid() == 0:  # the worker's uid is ours alone: kill what it started since
            kill_uid_processes(self.uid(index), started_at)
        if index in self.scratch_dirs:
            shutil.rmtree(self.scratch_dirs.pop(index), ignore_errors=True)


@functools.lru_cache(maxsize=None)
def warn_not_isolated() -> None:
    warnings.warn("sandbox backend 'process' applies rlimits only; it is not isolation "
                  "(model code can read the host's files)", RuntimeWarning, stacklevel=3)


@functools.lru_cache(maxsize=None)
def bwrap_works(python: str) -> bool:
    if not shutil.which("bwrap") or not os.path.exists(python):
        return False
    cmd = ["bwrap", "--unshare-net", "--unshare-pid", "--ro-bind", "/", "/", "--proc", "/proc",
           "--dev", "/dev", *(["--unshare-user"] if os.geteuid() != 0 else []), "--", python, "-c", "pass"]
    try:
        return subprocess.run(cmd, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


UID_BLOCK_TOP, UID_BLOCK_SIZE, UID_BLOCKS = 65533, 128, 100
UID_LOCK_DIR = "/tmp/ewa-sandbox-uids"


@functools.cache
def claim_uid_block() -> int:
    """The top uid of a block held (by an flock) for this process's lifetime; one block per process.

    Sandboxes of concurrent jobs (sampling beside evaluation) must not share uids: RLIMIT_NPROC is
    counted per uid across the host, so one job's fork bomb would starve the other's candidates.
    """
    import fcntl

    os.makedirs(UID_LOCK_DIR, mode=0o700, exist_ok=True)
    for block in range(UID_BLOCKS):
        fd = os.open(os.path.join(UID_LOCK_DIR, f"{block}.lock"), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return UID_BLOCK_TOP - block * UID_BLOCK_SIZE  # the open fd keeps the lock until exit
    raise RuntimeError(f"sandbox: all {UID_BLOCKS} uid blocks are in use")


def kill_uid_processes(uid: int, started_at: float) -> None:
    """SIGKILL processes of `uid` started after `started_at` (time.time()); older ones aren't ours."""
    boot = time.time() - float(Path("/proc/uptime").read_text().split()[0])
    ticks = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            stat = (entry / "stat").read_text()
            start = boot + int(stat.rsplit(")", 1)[1].split()[19]) / ticks
            if start >= started_at - 1:
                os.kill(int(entry.name), 9)
        except (OSError, ValueError, IndexError):
            pass


def get_backend(settings: SandboxSettings) -> Backend:
    name = settings.backend if settings.backend not in (None, "auto") else default_backend(settings.python)
    if name not in BACKENDS:
        raise ValueError(f"sandbox.backend: unknown backend {name!r} (known: {', '.join(sorted(BACKENDS))})")
    backend = BACKENDS[name](settings)
    if not backend.available():
        raise ValueError(f"sandbox.backend: {name!r} is not usable on this machine")
    return backend


def default_backend(python: str | None = None) -> str:
    python = python or SandboxSettings().python
    return "bwrap" if bwrap_works(python) else "process"
