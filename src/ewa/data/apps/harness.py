"""APPS's harness as fork-server source: runs only inside the sandbox, appended to ewa.sandbox.forkserver's
source (whose names it uses: Harness, register, reliability_guard, encode, run_on_mocked_stdio, ...); never
imported in the host. What it reproduces of hendrycks/apps eval/testing_util.py (362aedc): the package's docstring.
"""


def apps_stdio_source(code):
    """A standard-input program as testing_util prepares it: every line that does not start with "from " or
    "import " is indented by a tab; from the first such line on, the code is the body of `def code():`, which
    `stdin = sys.stdin` and `stdout = sys.stdout` precede (import lines after it are indented into the body
    too). Lines are cut at "\\n" alone, so a string literal spanning lines gets the tabs as well, as there."""
    lines = [line + "\n" if line.startswith(("from ", "import ")) else "\t" + line + "\n" for line in code.split("\n")]
    out, started = [], False
    for line in lines:
        if line.startswith("\t") and not started:
            out += ["stdin = sys.stdin\nstdout = sys.stdout\n", "def code():\n", line]
            started = True
        elif started and line.startswith(("from ", "import ")):
            out.append("\t" + line)
        else:
            out.append(line)
    return "".join(out)


def apps_int_keyed_args(args):
    """The reference's conversion of a first argument that is a dict (JSON keys are strings): the arguments
    become that one dict, int-keyed; unchanged where a key is not an integer."""
    try:
        if isinstance(args[0], dict):
            return [{int(k): v for k, v in args[0].items()}]
    except Exception:
        pass
    return args


class AppsHarness(Harness):
    """testing_util's: reliability_guard (exit and quit set to None), then the program under its import header
    in a plain namespace (pyext's RuntimeModule.from_string execs it in a dict, so `__name__` is builtins'):
    a stdin program rewritten into code() (apps_stdio_source) and called once per test with sys.stdin a
    StringIO of the input and sys.stdout captured; a call-based one's function taken from a Solution()
    instance where the source says "class Solution", else from the module, and called on the arguments."""
    name = "apps"
    imports = (GUARD_IMPORTS, "import numpy\n")  # numpy where the interpreter has it (warm ignores a failure)
    own_stdio = True
    stack_bytes = 8 << 20  # the reference runs programs in its own process: the usual `ulimit -s`

    def source(self, job):
        code, prelude = job["code"], job.get("prelude", "")
        return prelude + (apps_stdio_source(code) if job["mode"] == "stdin" else code)

    def warm_compiler(self):
        apps_stdio_source(WARM_SOURCE)

    def namespace(self, job):
        reliability_guard()
        builtins.exit = None  # testing_util's reliability_guard sets both exit and quit to None
        return {}

    def run_stdin(self, job, ns, out_fd):
        if not callable(ns.get("code")):
            raise RuntimeError("the program has no statement to run as code() (the reference fails it: no method)")
        text = job.get("input", "")  # call_method's: sys.stdin a StringIO of the input
        captured = io.StringIO()
        captured.close = lambda x: 1  # Capturing's no-op close, which takes one argument: close() raises there
        run_on_mocked_stdio(ns["code"], text, io.StringIO(text), out_fd, captured)

    def call(self, job, ns, source, args):
        args = apps_int_keyed_args(args)
        if "class Solution" in job["code"]:
            target = ns["Solution"]()
            method = getattr(target, job["func"])
        elif job["func"] in ns:
            method = ns[job["func"]]
        else:
            raise AttributeError(f"module 'tmp_sol' has no attribute {job['func']!r}")
        return encode(method(*args), rich=True)


register(AppsHarness())
