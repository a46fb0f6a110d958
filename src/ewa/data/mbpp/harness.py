"""MBPP's harness as fork-server source: runs only inside the sandbox, appended to ewa.sandbox.forkserver's
source (whose names it uses: Harness, register, HARNESSES, builtins, check_outcome, ...); never imported in
the host. What it reproduces of MBPP's evaluation: the package's docstring.

The candidate runs as check_correctness runs a program (that harness, found by its registered name): the
setup code (the request's starter), then the program, in one namespace under reliability_guard with stdio
swallowed, serving the checker's operations on its objects. The checker uses that harness's protocol too
(`ask`, `Remote`, `remote_import`, `free_globals`, `PEER`: the check_correctness source, appended to the
same server, defines them); what differs is only that MBPP's asserts bind nothing of their own, so the
wrapper `check` the test code defines shadows no name of the program.
"""
BASE_HARNESS = "check_correctness"


def mbpp_check(req, req_w, resp_r):
    """The asserts as MBPP's evaluation runs them after the program: every free name looked up in the
    program's namespace (its globals, the builtins it changed or deleted), imports importing its modules,
    nothing of the program shadowed by the test code's own `check`."""
    PEER[:] = [req_w, resp_r, req["out_cap"]]
    ns = {"__builtins__": dict(builtins.__dict__, __import__=remote_import)}
    try:
        exec(compile(req["input"], "<test>", "exec", dont_inherit=True), ns)
        check = ns.pop("check", None)  # its globals are `ns`: the program's `check`, if any, takes the name
        bound = set(ns) - {"__builtins__"}
        names = ask("names", sorted((free_globals(req["input"]) | {req["func"]}) - bound), [])
    except BaseException as e:
        failed = f"test code failed: {type(e).__name__}: {e}"[:2000]
        return candidate_outcome(e) or {"outcome": "error", "error": failed}
    if not callable(check):
        return {"outcome": "error", "error": "test code defines no check(candidate)"}
    for name in names["absent"]:
        ns["__builtins__"].pop(name, None)
    ns.update(names["found"])
    if req["func"] not in names["found"]:
        return {"outcome": "candidate", "exc": "NameError", "error": f"name {req['func']!r} is not defined"}
    candidate = names["found"][req["func"]]
    if req.get("explain") and type(candidate) is Remote:
        EXPLAIN["handle"] = object.__getattribute__(candidate, "_ewa_handle")
    return check_outcome(check, candidate)


class MbppHarness(Harness):
    """check_correctness's candidate (prepared and served by that harness), MBPP's checker."""
    name = "mbpp"

    @staticmethod
    def base():
        if BASE_HARNESS not in HARNESSES:
            raise RuntimeError(f"the mbpp harness needs the {BASE_HARNESS!r} harness, which is not registered")
        return HARNESSES[BASE_HARNESS]

    @property
    def imports(self):
        return self.base().imports

    @property
    def stack_bytes(self):
        return self.base().stack_bytes

    def namespace(self, job):
        return self.base().namespace(job)

    def serve(self, job, ns, flag_fd):
        self.base().serve(job, ns, flag_fd)

    def check(self, req, req_w, resp_r):
        return mbpp_check(req, req_w, resp_r)


register(MbppHarness())
