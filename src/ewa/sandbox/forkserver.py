"""The in-sandbox fork server: stdlib only, run by the lean interpreter as `python -c SOURCE`.

Processes (all one unprivileged uid, all non-dumpable so none can ptrace or read another's memory):
  router     this script; reads length-prefixed JSON requests from the host on stdin, replies on
             stdout; forks a *checker* per testcode test (it alone ever holds test code).
  zygote     forked by the router before any request; forks one *candidate* per test with rlimits,
             captures its output, times it and reaps its whole process tree. It never receives test
             code or expected values, so no candidate inherits them in its memory.
  candidate  runs the model's code: as __main__ on stdin (mode stdin), one call of func_name on
             JSON arguments (mode call), or serving the checker's calls over pipes (mode serve).
Values cross process boundaries through `encode`/`decode`, which rebuild plain builtin values, so a
candidate's return value cannot carry a forged __eq__ into the comparison.
"""
import builtins
import fcntl
import io
import json
import linecache
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

HEADER = struct.Struct(">I")
MAX_DEPTH = 200
TAIL = 8192  # bytes of stderr kept for the verdict and the error message
GRACE_S = 2.0  # how long the router waits for a checker after its candidate ended
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG = 4, 36, 1


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
def encode(v, depth=0):
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    t = type(v)
    if v is None or t is bool or t is str or t is float:
        return v
    if t is int:
        return v if -(1 << 900) < v < (1 << 900) else {"#i": hex(v)}
    if t is list:
        return [encode(x, depth + 1) for x in v]
    tags = {tuple: "#t", set: "#s", frozenset: "#fs"}
    if t in tags:
        return {tags[t]: [encode(x, depth + 1) for x in v]}
    if t is dict:
        return {"#d": [[encode(k, depth + 1), encode(x, depth + 1)] for k, x in v.items()]}
    if t is bytes:
        return {"#b": v.hex()}
    if t is complex:
        return {"#c": [v.real, v.imag]}
    raise TypeError(f"a value of type {t.__name__} cannot leave the sandbox (plain values only)")


def decode(x, depth=0):
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    t = type(x)
    if t is list:
        return [decode(i, depth + 1) for i in x]
    if t is not dict:
        return x
    if len(x) != 1:
        raise ValueError("malformed encoded value")
    ((tag, body),) = x.items()
    if tag in ("#t", "#s", "#fs") and type(body) is list:
        items = [decode(i, depth + 1) for i in body]
        return {"#t": tuple, "#s": set, "#fs": frozenset}[tag](items)
    if tag == "#d" and type(body) is list:
        return {decode(k, depth + 1): decode(v, depth + 1) for k, v in body}
    if tag == "#b" and type(body) is str:
        return bytes.fromhex(body)
    if tag == "#c" and type(body) is list and len(body) == 2:
        return complex(float(body[0]), float(body[1]))
    if tag == "#i" and type(body) is str:
        return int(body, 16)
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


def move_fds(fds, first):
    """Place fds at first, first+1, ... and close everything else above 2."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in fds]  # first out of the way of the targets
    for i, fd in enumerate(high):
        os.dup2(fd, first + i)
    os.closerange(first + len(fds), 1 << 20)


def set_limits(job):
    cpu = int(job["cpu"]) + 1  # SIGXCPU just past the limit, SIGKILL a second later
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if job.get("mem"):
        resource.setrlimit(resource.RLIMIT_AS, (job["mem"], job["mem"]))
        _, hard = resource.getrlimit(resource.RLIMIT_STACK)
        stack = min(job["mem"], 256 << 20)
        if hard == resource.RLIM_INFINITY or hard >= stack:
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


def serve(ns):
    while True:
        req = recv_msg(3)
        if req is None:
            return
        try:
            fn = resolve(ns, req["name"])
            kwargs = {k: decode(v) for k, v in req.get("kwargs", {}).items()}
            reply = {"ok": encode(fn(*decode(req["args"]), **kwargs))}
        except MemoryError:
            reply = {"exc": "MemoryError", "msg": ""}
        except Exception as e:
            try:
                msg = str(e)[:500]
            except Exception:
                msg = ""
            reply = {"exc": type(e).__name__, "msg": msg}
        send_msg(4, reply)


def candidate_main(job, code, stdin_fd, out_w, err_w, extra, workdir):
    status = 70
    try:
        os.setsid()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the zygote (process backend)
        os.dup2(stdin_fd, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        move_fds(extra, 3)
        os.chdir(workdir)
        set_limits(job)
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False), 1 << 16),
                                      encoding="utf-8")
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", write_through=True)
        sys.argv = ["solution.py"]
        mode = job["mode"]
        status = 0
        ns = {"__name__": "__main__" if mode == "stdin" else "solution", "__builtins__": builtins}
        exec(code, ns)
        if mode == "call":
            args = [json.loads(line) for line in job.get("input", "").split("\n") if line.strip()]
            write_all(3, json.dumps(encode(resolve(ns, job["func"])(*args))).encode())
        elif mode == "serve":
            serve(ns)
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            try:
                print(e.code, file=sys.stderr)
            except BaseException:
                pass
    except MemoryError:
        status = 1
        os.write(2, b"\nMemoryError\n")  # no allocation: the marker must survive an exhausted heap
    except BaseException as e:
        status = 1
        try:  # from the model's own frames on: the runner's frame is noise in feedback
            traceback.print_exception(type(e), e, e.__traceback__.tb_next)
        except BaseException:
            os.write(2, b"\nerror while printing the traceback\n")
    finally:
        try:
            sys.stdout.flush()
        except BaseException:
            pass
        os._exit(status & 0xFF)


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


def run_job(job, code, extra, scratch):
    try:
        stdin_fd = os.memfd_create("stdin")
    except (AttributeError, OSError):
        stdin_fd = os.dup(tempfile.TemporaryFile(dir=scratch[0]).fileno())
    if job["mode"] == "stdin":
        write_all(stdin_fd, job.get("input", "").encode())
        os.lseek(stdin_fd, 0, os.SEEK_SET)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pipes = [out_r, err_r]
    child_fds = [stdin_fd, out_w, err_w]
    if job["mode"] == "call":
        res_r, res_w = os.pipe()
        pipes.append(res_r)
        extra = [res_w]
    start, pid = time.monotonic(), None
    try:
        pid = os.fork()
    except OSError:
        for fd in pipes:
            os.close(fd)
        raise
    finally:
        if pid != 0:  # the child's ends are the child's alone
            for fd in child_fds + list(extra):
                os.close(fd)
    if pid == 0:
        candidate_main(job, code, stdin_fd, out_w, err_w, extra, scratch[0])
    status, usage, outs, timeout, overflow = supervise(pid, pipes, job["wall"], job["out_cap"])
    wall = time.monotonic() - start
    clean_dirs(scratch)
    return {
        "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "cpu": usage.ru_utime + usage.ru_stime,
        "wall": wall,
        "rss_kb": usage.ru_maxrss,
        "timeout": timeout,
        "overflow": overflow,
        # The whole stdout only where the host compares it; otherwise a head for feedback.
        "stdout": (outs[0] if job["mode"] == "stdin" and not overflow else outs[0][:TAIL]).decode("utf-8", "replace"),
        "stderr": outs[1][-TAIL:].decode("utf-8", "replace"),
        "result": outs[2].decode("utf-8", "replace") if len(outs) > 2 else None,
    }


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
    cached_src, cached_code = None, None
    while True:
        job, fds = recv_job(sock)
        if job is None:
            os._exit(0)
        if job["code"] != cached_src:
            cached_src, cached_code = job["code"], None
            try:
                cached_code = compile(job["code"], "<solution>", "exec", dont_inherit=True)
                lines = job["code"].splitlines(keepends=True)  # so tracebacks show the source lines
                linecache.cache["<solution>"] = (len(job["code"]), None, lines, "<solution>")
            except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError) as e:
                cached_code = "".join(traceback.format_exception_only(type(e), e))[-2000:]
        if isinstance(cached_code, str):
            reply = {"ce": cached_code}
            for fd in fds:
                os.close(fd)
        else:
            try:
                reply = run_job(job, cached_code, fds, scratch)
            except OSError as e:  # e.g. fork refused: a failure of this test, not of the server
                reply = {"error": f"sandbox could not run the test: {e}"}
        send_msg(sock.fileno(), reply)


# ---- the checker (testcode): trusted test code, calling the candidate through a proxy -----------
class CandidateFailure(BaseException):
    """The candidate raised, died, or answered garbage; BaseException so test code can't swallow it."""

    def __init__(self, exc, msg=""):
        super().__init__(f"{exc}: {msg}")
        self.exc, self.msg = exc, msg


def make_proxy(name, req_w, resp_r, cap):
    def proxy(*args, **kwargs):
        payload = {"name": name, "args": encode(list(args)), "kwargs": {k: encode(v) for k, v in kwargs.items()}}
        try:
            send_msg(req_w, payload)
            reply = recv_msg(resp_r, cap)
        except (OSError, ValueError):
            reply = None
        if reply is None:
            raise CandidateFailure("died", "the candidate process ended before answering")
        if "ok" in reply:
            try:
                return decode(reply["ok"])
            except Exception:
                raise CandidateFailure("BadReply", "unreadable return value") from None
        exc = getattr(builtins, str(reply.get("exc")), None)
        if isinstance(exc, type) and issubclass(exc, Exception) and exc is not AssertionError:
            err = exc(reply.get("msg", ""))  # catchable by test code that expects it
            err.ewa_candidate = str(reply.get("exc"))
            raise err
        raise CandidateFailure(str(reply.get("exc")), str(reply.get("msg", "")))
    proxy.__name__ = proxy.__qualname__ = name
    return proxy


def global_names(tree):
    import ast
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def run_check(req, req_w, resp_r):
    import ast
    ns = {"__name__": "__check__", "__builtins__": builtins}
    if req.get("starter"):  # the trusted prompt: helpers such as HumanEval's poly()
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
    try:
        check(ns[req["func"]])
    except CandidateFailure as e:
        return {"outcome": "candidate", "exc": e.exc, "error": e.msg[:2000]}
    except BaseException as e:
        if getattr(e, "ewa_candidate", None):
            return {"outcome": "candidate", "exc": e.ewa_candidate, "error": str(e)[:2000]}
        kind = "assertion" if isinstance(e, AssertionError) else "error"
        return {"outcome": kind, "error": "".join(traceback.format_exception_only(type(e), e))[-2000:]}
    return {"outcome": "pass"}


def checker_main(req, req_w, resp_r, rep_w):
    try:
        os.setsid()
        cpu = int(req["wall"]) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        move_fds([req_w, resp_r, rep_w], 3)
        report = run_check(req, 3, 4)
        os.close(3)  # EOF tells the candidate to exit
        send_msg(5, report)
    finally:
        os._exit(0)


# ---- the router ---------------------------------------------------------------------------------
CANDIDATE_KEYS = ("mode", "code", "input", "func", "cpu", "wall", "mem", "nproc", "fsize", "out_cap")


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
                        "uid": os.getuid(), "dumpable_off": dumpable_off})
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
