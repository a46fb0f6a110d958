"""Judge a samples file in the sandbox and write one verdict row per sample (parquet).

Resumable: finished samples are written in chunks to `<out>.partial/` and skipped on restart, but only
by a run on the same inputs (their content, the sandbox and the judge); the final file appears
(atomically) only when every sample has exactly one row. One run writes an output at a time
(`ewa.io.exclusive_output`); a run that fails removes the partial results it started.

A program sampled several times for one problem (a small model repeats itself: half or more of the
miniature's samples are exact copies) is run once; its copies get the same verdict and name the
sample that was run in `duplicate_of`. `--judge-duplicates` runs every copy instead. With a verdict
cache (`--verdict-cache`, ewa.evaluate.cache) a program another evaluation already judged on the same
problem and under the same judge is not run again either: `cached_from` names where it was judged.

Each row names the judge semantics its problem was judged under (`judge`; ewa.sandbox.semantics), and
the file's provenance records the name, version and description of every one used (`judge`). A row's
`tests` are the tests its verdict used (a semantics with hidden_only: the hidden ones alone); `float_tol`, `float_error` and
`any_case` say how its output was compared: the tolerance for reals, the statement's kind of error
("absolute", "absolute or relative"; null: the sandbox's float_tol) and whether letter case was ignored
(null where the semantics has no such rule: Semantics.tolerant false, testcode).

A sample whose `code` is null (its setting found no answer) is CE; evaluation never re-extracts code
from its completion (see `submission`). The study counts it as a correctness failure like any CE, but
the row keeps the two apart in `ce_kind`: "no_answer" for a sample with no program (a tools sample
whose model ran its program and never restated it, an answer cut off by the budget), "compile" for a
program the judge would not run (a syntax error, a source over sandbox.max_source_bytes), null when the
verdict is not CE. Files written before the column have none; the analysis reads that as unknown.

A multi-turn sample (agentic: `turn_codes` lists every turn's program) also has its first attempt
judged: `first_verdict` is that verdict, so first-attempt and final solve rates can be compared. For a
one-turn sample it equals `verdict`.
"""
from __future__ import annotations

import json
import shutil
from concurrent.futures import Future
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ewa.errors import UserError
from ewa.io import atomic_path, exclusive_output, provenance, read_jsonl, sha256_file, write_json
from ewa.problems import Problem, problems_by_id
from ewa.progress import Progress
from ewa.sandbox.extract import extract_code
from ewa.sandbox.results import SampleResult
from ewa.verdicts import CE, COMPILE, NO_ANSWER

CHUNK = 64
RESULT_COLUMNS = ("problem_id", "sample_id", "duplicate_of", "cached_from", "judge", "verdict", "ce_kind", "first_verdict",
                  "tests_passed", "tests_total",
                  "first_failed_test", "first_failed_tier", "cpu_time_s", "peak_memory_mb", "tests",
                  "backstop_kills", "float_tol", "float_error", "any_case")
TEST_TYPE = pa.list_(pa.struct([("index", pa.int64()), ("verdict", pa.string()), ("cpu_time_s", pa.float64()),
                                ("wall_time_s", pa.float64()), ("peak_memory_mb", pa.float64()),
                                ("tier", pa.int64()), ("error", pa.string()), ("wall_backstop", pa.bool_())]))
ERROR_CHARS = 500


def submission(rec: dict, where: str) -> str | None:
    """The program a sample record submits; None (judged CE) when it has none.

    - `code` is a string: that program.
    - `code` is null: the inference setting found no answer (`ewa sample` writes this). That is CE, and
      the completion is never searched again: a setting decides what counts as its answer (the tools
      setting excludes code inside tool calls and their outputs), and evaluation must not overrule it.
    - no `code` key at all, only a `completion` (a plain external samples file): the program is
      extracted from the completion as the reasoning setting does (last fenced block; none: CE).
    - neither: an error.
    """
    if "code" in rec:
        if rec["code"] is None or isinstance(rec["code"], str):
            return rec["code"]
        raise UserError(f"{where}: field 'code' must be a string or null (no answer), got {type(rec['code']).__name__}")
    if isinstance(rec.get("completion"), str):
        return extract_code(rec["completion"])
    raise UserError(f"{where}: needs a field 'code' or 'completion' (code: a string, or null for no answer)")


def first_attempt(rec: dict, where: str) -> tuple[bool, str | None]:
    """(whether the record has an earlier attempt to judge, the first turn's program or None)."""
    turns = rec.get("turn_codes")
    if turns is None:
        return False, None
    if not isinstance(turns, list) or any(c is not None and not isinstance(c, str) for c in turns):
        raise UserError(f"{where}: field 'turn_codes' must be a list of programs (strings, or null for a turn without one)")
    return len(turns) > 1, turns[0] if turns else None


def load_samples(path: str, problems: dict[str, Problem]) -> list[dict]:
    samples, seen = [], set()
    for lineno, rec in read_jsonl(path):
        where = f"{path}:{lineno}"
        pid, sid = rec.get("problem_id"), rec.get("sample_id")
        if not isinstance(pid, str):
            raise UserError(f"{where}: field 'problem_id' must be a string")
        if not isinstance(sid, (str, int)) or isinstance(sid, bool):
            raise UserError(f"{where}: field 'sample_id' must be a string or an integer")
        if pid not in problems:
            raise UserError(f"{where}: unknown problem_id {pid!r} (not in the problems file)")
        if (pid, sid) in seen:
            raise UserError(f"{where}: sample ({pid!r}, {sid!r}) appears twice")
        seen.add((pid, sid))
        code = submission(rec, where)
        carried = {k: v for k, v in rec.items() if k not in ("problem_id", "sample_id", "code", "completion")}
        multi_turn, first_code = first_attempt(rec, where)
        samples.append({"problem_id": pid, "sample_id": sid, "code": code, "multi_turn": multi_turn,
                        "first_code": first_code, "carried": carried})
    return samples


def load_tiers(path: str, problems: dict[str, Problem]) -> dict[str, list[int]]:
    try:
        per_problem = json.loads(Path(path).read_text())["problems"]
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
        raise UserError(f"{path}: not a tiers file (JSON with 'problems')") from None
    tiers = {}
    for pid, p in problems.items():
        tier = (per_problem.get(pid) or {}).get("test_tier")
        if not isinstance(tier, list) or len(tier) != len(p.tests):
            raise UserError(f"{path}: problem {pid!r}: field 'test_tier' must list a tier for each of its "
                            f"{len(p.tests)} tests")
        tiers[pid] = tier
    return tiers


def ce_kind(code: str | None, r: SampleResult) -> str | None:
    """Why a sample is CE: "no_answer" (no program to judge), "compile" (a program that did not compile,
    or was too long to); None when it is not CE."""
    if r.verdict != CE:
        return None
    return NO_ANSWER if code is None else COMPILE


def row(sample: dict, order: int, r: SampleResult, duplicate_of=None, first: SampleResult | None = None,
        cached_from: str | None = None) -> dict:
    # a sample without a `code` key (a caller building rows for programs it judged itself) had a program
    kind = ce_kind(sample.get("code", ""), r)
    out = {"_order": order, "problem_id": sample["problem_id"], "sample_id": sample["sample_id"],
           "duplicate_of": duplicate_of, "cached_from": cached_from, "judge": r.judge, "verdict": r.verdict, "ce_kind": kind,
           "first_verdict": (first or r).verdict, "tests_passed": r.tests_passed,
           "tests_total": r.tests_total,
           "first_failed_test": r.first_failed_test, "first_failed_tier": r.first_failed_tier,
           "cpu_time_s": r.cpu_time_s, "peak_memory_mb": r.peak_memory_mb,
           "tests": [{"index": t.index, "verdict": t.verdict, "cpu_time_s": t.cpu_time_s,
                      "wall_time_s": t.wall_time_s, "peak_memory_mb": t.peak_memory_mb, "tier": t.tier,
                      "error": t.error[-ERROR_CHARS:], "wall_backstop": t.wall_backstop} for t in r.tests],
           # tests the wall-clock backstop ended: verdicts machine load (not CPU time) decided
           "backstop_kills": r.backstop_kills,
           **{k: (r.output_rule or {}).get(k) for k in ("float_tol", "float_error", "any_case")}}
    for k, v in sample["carried"].items():
        out[k if k not in out else f"sample_{k}"] = v
    return out


def to_table(rows: list[dict]) -> pa.Table:
    columns = {}
    for name in dict.fromkeys(k for r in rows for k in r):
        values = [r.get(name) for r in rows]
        if name == "tests":
            columns[name] = pa.array(values, type=TEST_TYPE)
            continue
        try:
            columns[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed types in a carried column: keep it as JSON
            columns[name] = pa.array([None if v is None else json.dumps(v) for v in values])
    return pa.table(columns)


class Partial:
    """`<out>.partial/`: chunks of finished rows plus what they were judged with. Open it only while
    holding the output's lock: it removes what killed runs left and what other inputs made."""

    def __init__(self, out: Path, fingerprint: dict):
        self.dir = out.with_name(out.name + ".partial")
        meta = self.dir / "meta.json"
        if self.dir.exists():
            try:
                old = json.loads(meta.read_text())
            except (OSError, json.JSONDecodeError):
                old = None
            if not old or old.get("fingerprint") != fingerprint:
                print(f"ewa evaluate: {self.dir} was made from other inputs; set aside, judging afresh")
                shutil.rmtree(self.dir)
            else:
                for stale in self.dir.glob(".*.tmp"):  # a chunk a killed run was writing
                    shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink()
        self.resumed = any(self.dir.glob("chunk-*.parquet"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.meta = json.loads(meta.read_text()) if meta.exists() else {"fingerprint": fingerprint}

    def save_meta(self, **fields) -> None:
        self.meta.update(fields)
        write_json(self.dir / "meta.json", self.meta)

    def chunks(self) -> list[Path]:
        return sorted(self.dir.glob("chunk-*.parquet"))

    def done(self) -> set[tuple]:
        keys = set()
        for chunk in self.chunks():
            t = pq.read_table(chunk, columns=["problem_id", "sample_id"]).to_pydict()
            keys.update(zip(t["problem_id"], t["sample_id"]))
        return keys

    def write(self, rows: list[dict]) -> None:
        with atomic_path(self.dir / f"chunk-{len(self.chunks()):06d}.parquet") as tmp:
            pq.write_table(to_table(rows), tmp)


def evaluate_file(problems_path: str, samples_path: str, out: str | Path, sandbox: dict, settings: dict,
                  tiers_path: str | None = None, calibration: str | None = None, time_factor: float | None = None,
                  workers: int | None = None, chunk_size: int = CHUNK) -> Path:
    """Judge every sample of `samples_path`; `sandbox` and `settings` are the config's `sandbox` and
    `evaluate` sections (early_stop, judge_duplicates, verdict_cache: a directory or None). An interrupted
    run resumes with its time factor."""
    from ewa.sandbox.semantics import provenance as judge_provenance
    problems = problems_by_id(problems_path)
    samples = load_samples(samples_path, problems)
    judges = judge_provenance(problems[s["problem_id"]].judge for s in samples)
    tiers = load_tiers(tiers_path, problems) if tiers_path else None
    out = Path(out)
    fingerprint = {"samples": sha256_file(samples_path), "problems": sha256_file(problems_path),
                   "tiers": sha256_file(tiers_path) if tiers_path else None, "early_stop": settings["early_stop"],
                   "judge_duplicates": settings["judge_duplicates"], "sandbox": sandbox, "time_factor": time_factor,
                   "calibration": sha256_file(calibration) if calibration else None,
                   "judge": {name: j["version"] for name, j in judges.items()}}
    cache_context = {k: fingerprint[k] for k in ("early_stop", "sandbox", "calibration", "judge")}
    # samples judged of all, samples/s and programs/s: lines on stderr and the job's progress file
    meter = Progress("evaluate", len(samples), "samples", out=out, counters={"programs": "programs"},
                     label=f"ewa evaluate {out.parent.parent.name} {out.parent.name}/{out.stem}")
    with exclusive_output(out, what="ewa evaluate"):
        partial = Partial(out, fingerprint)
        try:
            with meter:  # done once the output is published
                judged_by = judge_all(samples, problems, tiers, partial, sandbox, settings, calibration, time_factor,
                                      workers, chunk_size, cache_context, out, meter)
                made_from = {"problems": str(problems_path), "samples": str(samples_path), "tiers": tiers_path,
                             "calibration": calibration, "evaluate": settings, "sandbox_config": sandbox}
                finish(out, partial, samples, provenance(made_from, **judged_by, judge=judges))
        except Exception:
            if not partial.resumed:  # what this run started goes with it; a resumed run's progress stays
                shutil.rmtree(partial.dir, ignore_errors=True)
            raise
    return out


def judge_all(samples, problems, tiers, partial: Partial, sandbox: dict, settings: dict, calibration, time_factor,
              workers, chunk_size, cache_context: dict, out: Path, meter: Progress | None = None) -> dict:
    """Judge every sample not yet in `partial`, chunk by chunk, counting each on `meter`; the sandbox part
    of the provenance."""
    from ewa.evaluate.cache import VerdictCache
    from ewa.sandbox import sandbox_from_config

    early_stop, judge_duplicates = settings["early_stop"], settings["judge_duplicates"]
    done = partial.done()
    todo = [(i, s) for i, s in enumerate(samples) if (s["problem_id"], s["sample_id"]) not in done]
    sb = sandbox_from_config(sandbox, calibration=calibration, workers=workers, time_factor=time_factor,
                             resumed_time_factor=partial.meta.get("time_factor"))
    with sb:
        info = sb.info()
        partial.save_meta(time_factor=sb.time_factor, sandbox=info)
        runs: dict[tuple, tuple] = {}  # (problem, code) -> (sample_id that ran it, its future, cache origin)
        cache = (VerdictCache(settings["verdict_cache"], {**cache_context, "time_factor": sb.time_factor})
                 if settings.get("verdict_cache") and not judge_duplicates else None)
        records: dict[str, str] = {}  # problem id -> its record, as the cache keys it
        stores: dict[Future, tuple] = {}  # every program this run judges -> (cache key, where), until stored

        def judged(key: tuple, s: dict, code):
            """The future judging `code` for sample s, the sample whose run it shares (None: its own), and
            where the cache says it was judged (None: here)."""
            if key in runs:
                return runs[key][1], runs[key][0], runs[key][2]
            pid = s["problem_id"]
            test_tiers = tiers[pid] if tiers else None
            fut, origin = None, None
            if cache is not None:
                if pid not in records:
                    records[pid] = json.dumps(problems[pid].to_record(), sort_keys=True)
                cache_key = cache.key(records[pid], code, test_tiers)
                hit = cache.get(cache_key)
                if hit is not None:
                    (fut := Future()).set_result(hit[0])
                    origin = hit[1]
            if fut is None:
                fut = sb.submit(problems[pid], code, early_stop=early_stop, test_tiers=test_tiers)
                if cache is not None:
                    stores[fut] = (cache_key, f"{out} (problem {pid}, sample {s['sample_id']})")
            runs[key] = (s["sample_id"], fut, origin)
            return fut, None, origin

        futures = []
        for i, s in todo:
            pid = s["problem_id"]
            fut, twin, origin = judged((pid, s["code"]) if not judge_duplicates else (i,), s, s["code"])
            first = None
            if s["multi_turn"]:
                key = (pid, s["first_code"]) if not judge_duplicates else (i, "first")
                first = judged(key, s, s["first_code"])[0]
            futures.append((i, s, fut, twin, first, origin))
        judged_here = len(stores)
        reused = (f", {len(runs) - judged_here} of them judged before ({settings['verdict_cache']})"
                  if cache else "")
        print(f"ewa evaluate: {len(todo)} samples to judge, {len(runs)} distinct programs run{reused}")
        rows = []
        if meter is not None:
            meter.restart_rates(len(done))  # a resumed run's rate counts only what it judges itself
            meter.update(done=len(done))
        for i, s, fut, twin, first, origin in futures:
            rows.append(row(s, i, fut.result(), twin, first.result() if first else None, origin))
            if meter is not None:  # a program is run once: its copies and cached verdicts cost nothing
                meter.update(1, programs=int(twin is None and origin is None))
            for done_fut in (fut, first):  # stored as soon as judged: evaluations beside this one read it
                if done_fut in stores:
                    cache_key, where = stores.pop(done_fut)
                    cache.put(cache_key, done_fut.result(), where)
            if len(rows) >= chunk_size:
                partial.write(rows)
                rows = []
        if rows:
            partial.write(rows)
    cached = {"verdict_cache": {"dir": str(settings["verdict_cache"]), "reused": len(runs) - judged_here,
                                "judged": judged_here}} if cache else {}
    return {"sandbox": info, "time_factor": info["time_factor"], **cached}


def check_complete(table: pa.Table, samples: list[dict], partial: Partial) -> None:
    """Exactly one row per sample, or an error: a result is never published short or doubled."""
    keys = list(zip(table.column("problem_id").to_pylist(), table.column("sample_id").to_pylist()))
    expected = {(s["problem_id"], s["sample_id"]) for s in samples}
    if len(keys) != len(set(keys)) or set(keys) != expected:
        missing, extra = len(expected - set(keys)), len(keys) - len(set(keys) & expected)
        raise UserError(f"{partial.dir}: holds {len(keys)} rows for {len(expected)} samples ({missing} missing, "
                        f"{extra} duplicate or unknown); was it written by another run? Nothing was published")


def finish(out: Path, partial: Partial, samples: list[dict], record: dict) -> None:
    tables = [pq.read_table(c) for c in partial.chunks()]
    if tables:
        table = pa.concat_tables(tables, promote_options="permissive")
        table = table.take(pc.sort_indices(table, [("_order", "ascending")])).drop_columns(["_order"])
    else:  # an empty samples file still gets a well-formed (empty) result
        table = pa.table({c: pa.array([], type=TEST_TYPE if c == "tests" else pa.null()) for c in RESULT_COLUMNS})
    check_complete(table, samples, partial)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"ewa": json.dumps(record, default=str)})
    with atomic_path(out) as tmp:
        pq.write_table(table, tmp)
    shutil.rmtree(partial.dir)
