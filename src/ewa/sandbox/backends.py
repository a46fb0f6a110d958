"""Sandbox backends, registered by the name `sandbox.backend` uses; each builds the command that
starts one fork server (ewa.sandbox.forkserver) for one worker, and cleans up after a dead one."""
from __future__ import annotations

import functools
import json
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

from ewa.errors import UserError
from ewa.sandbox import forkserver



@functools.lru_cache(maxsize=None)
def server_source() -> str:
    """The fork server's source with every format's harness (ewa.formats) appended before it starts: each
    subclasses forkserver.Harness and registers itself under the name its requests carry."""
    from ewa.formats import harness_sources

    core = Path(forkserver.__file__).read_text()
    start = core.rindex('\nif __name__ == "__main__":')
    harnesses = "".join(f"\n\n# ---- harness {name!r} (ewa.formats) ----\n{text}" for name, text in harness_sources())
    return core[:start] + harnesses + core[start:]

# The oldest interpreter the fork server runs on (socket.send_fds, os.pidfd_open).
MIN_PYTHON = (3, 9)
# Prints the interpreter's version and where it lives; runs on any Python, 2.7 included.
PROBE = ("import sys, json; p = lambda n: getattr(sys, n, None); "
         "sys.stdout.write(json.dumps({'version': list(sys.version_info[:3]), 'prefix': p('prefix'), "
         "'base_prefix': p('base_prefix'), 'exec_prefix': p('exec_prefix'), "
         "'base_exec_prefix': p('base_exec_prefix'), 'executable': p('executable'), 'path': sys.path}))")
# What the bwrap sandbox shows of the host, besides the interpreter's own directories (the bin/ and
# lib/ of its prefix, its import path): the system's programs and libraries (a symlink stays a
# symlink), time zones, and the few /etc files the loader and libc read. Nothing else exists inside.
SYSTEM_DIRS = ("/usr/bin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/share/zoneinfo",
               "/bin", "/lib", "/lib32", "/lib64", "/libx32")
PREFIX_DIRS = ("bin", "lib", "lib64", "pyvenv.cfg")  # of each prefix; not share/, include/, ...
SYSTEM_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/nsswitch.conf", "/etc/localtime")


@dataclass(frozen=True, kw_only=True)
class SandboxSettings:
    """How a sandbox runs: the keys of the config's `sandbox` section, which sandbox_from_config passes from
    the validated section (python and docker_image have no default here), and the limits the config
    leaves to the code."""
    backend: str | None = None  # bwrap | docker | process; None or "auto": default_backend() (never process)
    workers: int = 0  # fork servers; 0: the CPUs granted to this process, shared among a job's ranks
    python: str  # the lean interpreter that runs model code (not the venv)
    uid: int | None = None  # worker i runs as uid - i; None: a block of uids no other live sandbox holds
    hide: tuple[str, ...] = ()  # host paths to mask should they lie inside what the bwrap sandbox shows
    tmp_size_mb: int = 256  # size of the sandbox's private /tmp (and /dev/shm)
    max_processes: int = 32  # RLIMIT_NPROC for a candidate (processes and threads)
    output_limit_mb: int = 64  # stdout/stderr/file size beyond which a test is cut off
    float_tol: float = 1e-6  # relative and absolute tolerance when comparing floats
    max_source_bytes: int | None = None  # longer programs are CE uncompiled; None: no limit
    docker_image: str  # scripts/docker-sandbox-image.sh builds it
    docker_python: str = "/usr/bin/python3"
    docker_memory_mb: int = 2048  # whole-container backstop; per-test limits are rlimits inside
    docker_pids_limit: int = 256


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

    def unavailable(self) -> str | None:
        """Why this backend cannot run on this machine (one phrase), or None when it can."""
        return None

    def available(self) -> bool:
        return self.unavailable() is None

    def check_interpreter(self) -> str:
        """The version of the interpreter model code runs on; a UserError (one line naming the setting)
        when the fork server cannot run on it: not found, not Python, or older than MIN_PYTHON."""
        return ".".join(map(str, interpreter(self.settings.python)["version"]))

    def uid(self, index: int) -> int:
        if self.settings.uid is not None:
            return self.settings.uid - index
        return claim_uid_block() - index

    def server(self, python: str) -> list[str]:
        scratch = [a for d in self.scratch for a in ("--scratch", d)]
        return [python, "-s", "-B", "-c", server_source(), *scratch]

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
    """bubblewrap: an allow-list filesystem (the interpreter with the bin/ and lib/ of its prefix, the
    system's programs and libraries, a few /etc files; all read-only), private /tmp, /dev and /proc, no
    network, no capabilities."""
    name = "bwrap"
    scratch = ("/tmp", "/dev/shm")

    def unavailable(self) -> str | None:
        if not shutil.which("bwrap"):
            return "bubblewrap (bwrap) is not installed"
        return bwrap_problem(tuple(self.namespace_args()), tuple(self.mounts()), self.settings.python)

    def check_interpreter(self) -> str:
        version = super().check_interpreter()
        self.mounts()  # the interpreter must be one the allow-list can show
        return version

    def namespace_args(self) -> list[str]:
        args = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                "--die-with-parent", "--new-session", "--hostname", "sandbox"]
        if os.geteuid() != 0:  # unprivileged bwrap: a user namespace, capabilities dropped inside it
            args += ["--unshare-user", "--cap-drop", "ALL"]
        return args

    def mounts(self) -> list[str]:
        """The whole filesystem of the sandbox: the allow-list, with this project, the working directory,
        ewa's own environment and `hide` masked should they lie inside it, then /dev, /proc and the
        private /tmp and /dev/shm. The root itself is an empty tmpfs, remounted read-only."""
        args, roots, needed = allow_list(self.settings.python)
        project = Path(__file__).resolve().parents[3]
        for p in sorted({os.path.realpath(p) for p in (*self.settings.hide, os.getcwd(), str(project), sys.prefix)
                         if os.path.exists(p)}):
            shown = any(is_within(p, r) for r in roots)
            if shown and not any(is_within(n, p) for n in needed):
                args = [*args, *(["--tmpfs", p] if os.path.isdir(p) else ["--ro-bind", "/dev/null", p])]
        size = str(self.settings.tmp_size_mb << 20)
        return [*args, "--dev", "/dev", "--proc", "/proc",
                "--perms", "1777", "--size", size, "--tmpfs", "/tmp",
                "--perms", "1777", "--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/"]

    def command(self, index: int) -> list[str]:
        cmd = ["bwrap", *self.namespace_args(), *self.mounts(), "--chdir", "/tmp", "--clearenv"]
        for k, v in self.env().items():
            cmd += ["--setenv", k, v]
        return [*cmd, "--", *drop_privileges(self.uid(index)), *self.server(self.settings.python)]


def is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@functools.lru_cache(maxsize=None)
def interpreter(python: str) -> dict:
    """What the configured interpreter is: version and prefixes. Run on the host (it is trusted; the
    model's code is not), once per process."""
    where = f"sandbox.python: {python}"
    if not os.path.isabs(python):
        raise UserError(f"{where} must be an absolute path to a Python >= {fmt_version(MIN_PYTHON)} interpreter")
    if not os.path.isfile(python) or not os.access(python, os.X_OK):
        raise UserError(f"{where} not found (or not executable); point sandbox.python at a Python >= "
                        f"{fmt_version(MIN_PYTHON)} interpreter")
    try:
        out = subprocess.run([python, "-E", "-s", "-c", PROBE], capture_output=True, text=True, timeout=60,
                             cwd="/", env=sandbox_env("/tmp"))
    except (OSError, subprocess.SubprocessError) as e:
        raise UserError(f"{where} does not run ({e})") from None
    try:
        info = json.loads(out.stdout)
        version = tuple(info["version"])
    except (ValueError, KeyError, TypeError):
        err = (out.stderr.strip().splitlines() or ["no answer"])[-1]
        raise UserError(f"{where} does not run as Python ({err[:200]})") from None
    check_version(version, where)
    return info


def fmt_version(version) -> str:
    return ".".join(map(str, version))


def check_version(version, where: str) -> None:
    if tuple(version) < MIN_PYTHON:
        raise UserError(f"{where} is Python {fmt_version(version)}; the sandbox's fork server needs Python >= "
                        f"{fmt_version(MIN_PYTHON)}")


@functools.lru_cache(maxsize=None)
def allow_list(python: str) -> tuple[list[str], list[str], list[str]]:
    """bwrap arguments that show `python` (through its symlinks), the bin/ and lib/ of its prefixes and
    its import path inside them or /usr, the libraries it links, the system's libraries and programs and
    the /etc files the loader and libc read, each at its own path, read-only; and nothing else.
    Returns (arguments, directories shown, paths of the interpreter)."""
    info = interpreter(python)
    prefixes = {p for p in (info["prefix"], info["base_prefix"], info["exec_prefix"], info["base_exec_prefix"]) if p}
    for real in {os.path.realpath(p) for p in (python, *prefixes)}:
        if any(is_within(real, d) for d in ("/tmp", "/dev", "/proc")):
            raise UserError(f"sandbox.python: {python} lives under {real}, which the sandbox replaces with its own; "
                            "install the interpreter elsewhere")
    own = [os.path.join(p, d) for p in prefixes for d in PREFIX_DIRS]
    homes = [os.path.realpath(p) for p in (*prefixes, "/usr")]
    imports = [p for p in info.get("path") or () if isinstance(p, str) and os.path.isabs(p) and os.path.isdir(p)
               and os.path.realpath(p) != "/" and any(is_within(os.path.realpath(p), h) for h in homes)]
    libraries = linked_libraries(os.path.realpath(python))
    dirs = [p for p in (*SYSTEM_DIRS, *own, *imports) if os.path.isdir(p)]
    roots: list[str] = []
    for real in sorted({os.path.realpath(d) for d in dirs}):
        if not any(is_within(real, r) for r in roots):
            roots.append(real)
    binds, links = list(roots), {}

    def expose(path: str, depth: int = 0) -> None:
        """Make `path` resolve inside as on the host: recreate each symlink met, bind the end."""
        parts, cur = Path(path).parts, "/"
        for i, part in enumerate(parts[1:], 1):
            nxt = os.path.join(cur, part)
            if os.path.islink(nxt) and depth < 40:
                target = os.readlink(nxt)
                if not any(is_within(nxt, r) for r in roots):
                    links[nxt] = target
                return expose(os.path.normpath(os.path.join(os.path.dirname(nxt), target, *parts[i + 1:])),
                              depth + 1)
            cur = nxt
        if os.path.exists(cur) and not any(is_within(cur, b) for b in binds):
            binds.append(cur)

    for p in (*dirs, *own, python, info.get("executable") or python, *libraries, *SYSTEM_ETC):
        if os.path.lexists(p):
            expose(p)
    # Directories on the way to each mount point, world-readable (bwrap would make them 0700 for root).
    parents = {str(q) for path in (*binds, *links) for q in Path(path).parents if str(q) != "/"}
    args = [a for d in sorted(parents) for a in ("--perms", "0755", "--dir", d)]
    for b in sorted(binds):
        args += ["--ro-bind", b, b]
    for link, target in sorted(links.items()):
        args += ["--symlink", target, link]
    needed = [os.path.realpath(p) for p in (python, *own) if os.path.lexists(p)]
    return args, roots, needed


def linked_libraries(binary: str) -> list[str]:
    """The shared libraries `binary` loads (ldd), so that one outside the system's directories is shown too."""
    try:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    libs = []
    for line in out.splitlines():
        words = line.split()
        path = words[2] if len(words) > 2 and words[1] == "=>" else (words[0] if words else "")
        if path.startswith("/"):
            libs.append(path)
    return libs


@functools.lru_cache(maxsize=None)
def bwrap_problem(namespaces: tuple[str, ...], mounts: tuple[str, ...], python: str) -> str | None:
    """None if this very sandbox (namespaces and allow-list) starts the interpreter; else bwrap's complaint."""
    cmd = ["bwrap", *namespaces, *mounts, "--chdir", "/tmp", "--clearenv", "--", *drop_privileges(65534),
           python, "-E", "-s", "-c", PROBE]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd="/")
    except (OSError, subprocess.SubprocessError) as e:
        return f"bwrap could not be started ({e})"
    if out.returncode == 0:
        return None
    err = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1][:300]
    hint = " (user namespaces disabled? see kernel.unprivileged_userns_clone / user.max_user_namespaces)" \
        if "namespace" in err or "uid map" in err or "Operation not permitted" in err else ""
    return f"bwrap fails here: {err}{hint}"


@register
class Docker(Backend):
    """`docker run -i` per worker: no network, read-only image, memory and pids capped by the engine."""
    name = "docker"
    scratch = ("/tmp", "/dev/shm")

    def __init__(self, settings: SandboxSettings):
        super().__init__(settings)
        self.names: dict[int, str] = {}

    def unavailable(self) -> str | None:
        return docker_problem(self.settings.docker_image)

    def check_interpreter(self) -> str:
        return docker_interpreter(self.settings.docker_image, self.settings.docker_python)

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


@functools.lru_cache(maxsize=None)
def docker_problem(image: str) -> str | None:
    """None if the docker client reaches an engine that holds `image`; else why not."""
    if not shutil.which("docker"):
        return "the docker client is not installed"

    def run(*args: str) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None

    info = run("info", "--format", "{{.ServerVersion}}")
    if info is None or info.returncode != 0 or not info.stdout.strip():
        return "no Docker engine is running (or this user cannot reach it)"
    image_info = run("image", "inspect", "--format", "{{.Id}}", image)
    if image_info is None or image_info.returncode != 0:
        return f"the engine has no image {image} (scripts/docker-sandbox-image.sh builds it)"
    return None


@functools.lru_cache(maxsize=None)
def docker_interpreter(image: str, python: str) -> str:
    """The version of `python` inside `image`; a UserError if the fork server cannot run on it."""
    where = f"sandbox.python of sandbox.docker_image {image} ({python})"
    hint = "; rebuild the image with scripts/docker-sandbox-image.sh"
    try:
        out = subprocess.run(["docker", "run", "--rm", "-i", "--pull", "never", "--network", "none", image,
                              python, "-E", "-s", "-c", PROBE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        raise UserError(f"{where} does not run ({e}){hint}") from None
    try:
        version = tuple(json.loads(out.stdout)["version"])
    except (ValueError, KeyError, TypeError):
        err = (out.stderr.strip().splitlines() or ["no answer"])[-1]
        raise UserError(f"{where} does not run ({err[:200]}){hint}") from None
    check_version(version, where)
    return fmt_version(version)


def get_backend(settings: SandboxSettings) -> Backend:
    """The backend `settings` name, ready to start; `auto` (or None) resolves by default_backend."""
    name = settings.backend if settings.backend not in (None, "auto") else resolve_auto(settings)
    if name not in BACKENDS:
        raise UserError(f"sandbox.backend: unknown backend {name!r} (known: {', '.join(sorted(BACKENDS))})")
    backend = BACKENDS[name](settings)
    if reason := backend.unavailable():
        raise UserError(f"sandbox.backend: {name} cannot run here: {reason}")
    if name != "docker":  # docker's runs in the image: checked when its workers start
        backend.check_interpreter()
    return backend


def resolve_auto(settings: SandboxSettings) -> str:
    """bwrap where it works, else docker (engine up, image present); never the unisolated `process`."""
    reasons = []
    for name in ("bwrap", "docker"):
        reason = BACKENDS[name](settings).unavailable()
        if reason is None:
            return name
        reasons.append(f"{name}: {reason}")
    raise UserError(f"sandbox.backend: auto found no isolating backend ({'; '.join(reasons)}); install bubblewrap "
                    "or build the Docker image (scripts/docker-sandbox-image.sh), or set sandbox.backend: process "
                    "to run model code with rlimits only and no isolation")


def default_backend(settings: SandboxSettings) -> str:
    """What `sandbox.backend: auto` resolves to here: bwrap, else docker; a UserError if neither works."""
    return resolve_auto(settings)
