"""LiveCodeBench's harness as fork-server source: runs only inside the sandbox, appended to
ewa.sandbox.forkserver's source (whose names it uses: Harness, register, reliability_guard, encode, ...);
never imported in the host. What it reproduces of lcb_runner's evaluation/testing_util.py: the package's
docstring."""


def lcb_stdio_source(code, prelude):
    """A stdin program as LiveCodeBench's harness loads it: a last top-level `if __name__ ==
    '__main__':` block replaced by its body, top-level imports hoisted after the prelude, every other
    statement the body of `def wrapped_function():`. Where the code does not parse it stays as it is
    (and fails to compile, as there); where it cannot be rewritten it has no wrapped_function."""
    import ast
    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            code = ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)
    except BaseException:  # the reference ignores any failure here (a bare except)
        pass
    try:
        tree = ast.parse(code)
        imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
        body = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
        extra = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}
        fn = ast.FunctionDef(name="wrapped_function", args=ast.arguments(
            posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=body, decorator_list=[], lineno=-1, **extra)
        return prelude + "\n" + ast.unparse(imports) + "\n" + ast.unparse(fn)
    except Exception:
        return code


def lcb_resolve(ns, name, source):
    """LiveCodeBench's choice: Solution().name when the source contains "class Solution", else the
    module's name (it fails the test when either is missing)."""
    if "class Solution" in source:
        return getattr(ns["Solution"](), name)
    if name not in ns:
        raise AttributeError(f"module 'tmp_sol' has no attribute {name!r}")
    return ns[name]


# sys.stdin while a stdin program runs: lcb_runner's MockStdinWithBuffer and MockBuffer (since its
# commit 16de2a1), names and all, so that what a program sees (and its error messages) are the reference's.
# Only __getattr__ delegates to the StringIO, and special methods bypass it: `for line in sys.stdin` is a
# TypeError there, and here.
class MockStdinWithBuffer:
    def __init__(self, inputs):
        self.inputs = inputs
        self._stringio = io.StringIO(inputs)
        self.buffer = MockBuffer(inputs)

    def read(self, *args):
        return self.inputs

    def readline(self, *args):
        return self._stringio.readline(*args)

    def readlines(self, *args):
        return self.inputs.split("\n")  # so a trailing newline makes a last line ""

    def __getattr__(self, name):
        return getattr(self._stringio, name)


class MockBuffer:
    def __init__(self, inputs):
        self.inputs = inputs.encode("utf-8")

    def read(self, *args):
        return self.inputs

    def readline(self, *args):
        return self.inputs.split(b"\n")[0] + b"\n"  # the first line, every time


class LcbHarness(Harness):
    """lcb_runner's: reliability_guard, then the program as module "tmp_sol"; stdin programs rewritten
    into wrapped_function (lcb_stdio_source) and called once per test on the reference's stdin mocks;
    functions resolved as lcb_resolve does, a returned tuple made a list, the value encoded rich."""
    name = "lcb"
    imports = (GUARD_IMPORTS,)
    own_stdio = True

    def source(self, job):
        code, prelude = job["code"], job.get("prelude", "")
        return lcb_stdio_source(code, prelude) if job["mode"] == "stdin" else prelude + "\n\n" + code

    def warm_compiler(self):
        lcb_stdio_source(WARM_SOURCE, "")

    def namespace(self, job):
        reliability_guard()
        module = type(sys)("tmp_sol", "")  # the reference's ModuleType("tmp_sol", "")
        return module.__dict__

    def run_stdin(self, job, ns, out_fd):
        if "wrapped_function" not in ns:
            raise RuntimeError("the program could not be rewritten into wrapped_function (as the reference does)")
        text = job.get("input", "")  # as lcb_runner's call_method: sys.stdin its MockStdinWithBuffer
        run_on_mocked_stdio(ns["wrapped_function"], text, MockStdinWithBuffer(text), out_fd)

    def call(self, job, ns, source, args):
        result = lcb_resolve(ns, job["func"], source)(*args)
        if isinstance(result, tuple):  # as the reference does, before it compares
            result = list(result)
        return encode(result, rich=True)


register(LcbHarness())
