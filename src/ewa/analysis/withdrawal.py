"""The withdrawal rule (`science.withdraw_if`): which sandbox and judge anomalies void a run, written in the
experiment config before the run, so a run is withdrawn by rule and never by reading its tables. The rule is
part of the validated config, so its sha256 (ewa.analysis.registry.experiment_sha256) registers it with the
seeds: a rule changed after registration is a config the registry refuses.

`ewa science` checks every seed of a table against it before rendering any claim, from what the pipeline
itself recorded:
- each evaluation table the seed's claims were made from (named with its sha256 in the claims' provenance):
  the share of samples judged RE (`max_re_share`), the share with a test ended by the wall-clock backstop, the
  one way machine load decides a verdict (`backstop_kills`, `max_backstop_share`), the samples judged per
  problem against `sample.n` (`complete`), and the calibration the judge applied (`calibration`: a calibration
  file wherever `sandbox.calibrate` asks for one, and one time factor for every table);
- the run's preflight records (`ewa preflight --out`): the containment probe (`containment`).

One breach withdraws the whole table, every seed, and scripts/science.py withdraws every table of that
registration: dropping a seed after a check failed is choosing seeds by their results.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq

from ewa.analysis.registry import init_seed_of, move_from_next
from ewa.errors import UserError
from ewa.io import sha256_file, write_json
from ewa.verdicts import RE

FILE = "withdrawal.json"
ALPHA_IN_PATH = re.compile(r"alpha([+-]\d+\.\d+)")


class WithdrawalError(UserError):
    """The rule cannot be checked (an evaluation missing or changed since its claims read it)."""


def evals_of(claims_dir: Path) -> tuple[int, list[Path]]:
    """A seed's number and the evaluation tables its claims read, each checked against the sha256 recorded."""
    record = json.loads((claims_dir / "provenance.json").read_text())
    seed, recorded = int(record["config"]["seed"]), record["config"].get("evals") or {}
    if not recorded:
        raise WithdrawalError(f"withdrawal rule: seed {seed}: {claims_dir / 'provenance.json'} names no evaluation "
                              "tables (made before claims recorded them); rerun that seed's claims step")
    paths = []
    for name, sha in recorded.items():
        path = Path(name)
        if path.suffix != ".parquet":  # the inputs recorded beside them: the problems file
            continue
        if not path.is_file():
            raise WithdrawalError(f"withdrawal rule: seed {seed}: {path}: missing (its claims were made from it); "
                                  "the rule cannot be checked")
        if sha256_file(path) != sha:
            raise WithdrawalError(f"withdrawal rule: seed {seed}: {path} changed since its claims read it; rerun "
                                  "that seed's analysis")
        paths.append(path)
    alphas = [ALPHA_IN_PATH.search(str(p)) for p in paths]  # the pipeline's paths name their alpha: grid order
    if all(alphas):
        paths = [p for _, p in sorted(zip((float(a.group(1)) for a in alphas), paths), key=lambda x: x[0])]
    return seed, paths


def where(seed: int, path: Path) -> str:
    alpha = ALPHA_IN_PATH.search(str(path))
    return f"seed {seed}, alpha {alpha.group(1)}" if alpha else f"seed {seed}, {path}"


def measure_table(path: Path) -> dict:
    """What the rule reads of one evaluation table: its rows per problem, RE and backstop shares, and the
    calibration its provenance (parquet metadata `ewa`) names."""
    schema = pq.read_schema(path)
    columns = [c for c in ("problem_id", "verdict", "backstop_kills") if c in schema.names]
    table = pq.read_table(path, columns=columns).to_pandas()
    meta = json.loads(schema.metadata[b"ewa"]) if schema.metadata and b"ewa" in schema.metadata else None
    made_from = (meta or {}).get("config") or {}
    n = len(table)
    return {"samples": n, "per_problem": table.groupby("problem_id").size().to_dict(),
            "re_share": float((table["verdict"] == RE).mean()) if n else 0.0,
            "backstop_share": (float((table["backstop_kills"] > 0).mean()) if n else 0.0)
            if "backstop_kills" in table else None,
            "problems_file": made_from.get("problems"), "calibrated": (made_from.get("sandbox_config") or {})
            .get("calibrate"), "calibration": made_from.get("calibration"),
            "time_factor": None if meta is None else meta.get("time_factor")}


def problems_in(path: str | None) -> set[str] | None:
    """The problem ids of a problems file the evaluation names (None where it is not here to read)."""
    if not path or not Path(path).is_file():
        return None
    return {json.loads(line)["id"] for line in Path(path).read_text().splitlines() if line.strip()}


def breach(seed, rule: str, measured, bound, at: str, files: list[str], detail: str) -> dict:
    return {"seed": seed, "rule": rule, "measured": measured, "bound": bound, "where": at, "files": files,
            "reason": f"{at}: {detail}"}


def table_breaches(seed: int, path: Path, m: dict, rule: dict, sample_n: int) -> list[dict]:
    at, files, found = where(seed, path), [str(path)], []
    if m["re_share"] > rule["max_re_share"]:
        found.append(breach(seed, "max_re_share", round(m["re_share"], 4), rule["max_re_share"], at, files,
                            f"RE share {m['re_share']:.3f} > max_re_share {rule['max_re_share']}"))
    if m["backstop_share"] is not None and m["backstop_share"] > rule["max_backstop_share"]:
        found.append(breach(seed, "max_backstop_share", round(m["backstop_share"], 4), rule["max_backstop_share"],
                            at, files, f"share of samples a wall-clock backstop ended {m['backstop_share']:.3f} > "
                            f"max_backstop_share {rule['max_backstop_share']}"))
    if rule["complete"]:
        problems = problems_in(m["problems_file"]) or set(m["per_problem"])
        short = {p: m["per_problem"].get(p, 0) for p in sorted(problems) if m["per_problem"].get(p, 0) != sample_n}
        if short:
            pid, got = next(iter(short.items()))
            found.append(breach(seed, "complete", m["samples"], len(problems) * sample_n, at, files,
                                f"{m['samples']} samples judged, the config implies {len(problems) * sample_n} "
                                f"({len(problems)} problems x sample.n {sample_n}); {len(short)} problem(s) differ, "
                                f"e.g. {pid} with {got}"))
    if rule["calibration"] and m["calibrated"] is not False and not m["calibration"]:
        why = "its provenance names no sandbox config" if m["calibrated"] is None else "no calibration file"
        found.append(breach(seed, "calibration", None, "a calibration file", at, files,
                            f"judged without the run's calibration ({why}; sandbox.calibrate asks for one)"))
    return found


def preflight_breaches(paths: list[Path]) -> list[dict]:
    """A containment probe that escaped, or a sandbox that did not start, in any preflight record of the run."""
    found = []
    for path in paths:
        record = json.loads(Path(path).read_text())
        check = (record.get("checks") or {}).get("sandbox") or {"status": "missing", "detail": "no sandbox check"}
        if check["status"] != "ok":
            found.append(breach(None, "containment", check["status"], "ok", f"preflight {record.get('node', path)}",
                                [str(path)], f"sandbox check {check['status']}: {check.get('detail', '')}"))
    return found


def check(claims_dirs: list[Path], rule: dict, sample_n: int, preflight: list[Path] = ()) -> dict:
    """The rule checked on every seed of a table and on the run's preflight records: what `withdrawal.json`
    holds (withdrawn, the first breach's reason, every breach, the largest shares measured, the files read)."""
    breaches, files, factors, worst = [], [], {}, {"re_share": (0.0, None), "backstop_share": (0.0, None)}
    for claims_dir in claims_dirs:
        seed, paths = evals_of(Path(claims_dir))
        files.append(str(Path(claims_dir) / "provenance.json"))
        for path in paths:
            m = measure_table(path)
            files.append(str(path))
            breaches += table_breaches(seed, path, m, rule, sample_n)
            for key in worst:
                if m[key] is not None and (worst[key][1] is None or m[key] > worst[key][0]):
                    worst[key] = (m[key], where(seed, path))
            if m["time_factor"] is not None:
                factors.setdefault(round(float(m["time_factor"]), 6), []).append(where(seed, path))
    if rule["calibration"] and len(factors) > 1:
        text = "; ".join(f"{f:.3f} ({at[0]}{', ...' if len(at) > 1 else ''})" for f, at in sorted(factors.items()))
        breaches.append(breach(None, "calibration", sorted(factors), "one time factor", "the table", [],
                               f"its evaluations were judged with {len(factors)} time factors: {text}"))
    if rule["containment"]:
        breaches += preflight_breaches(list(preflight))
        files += [str(p) for p in preflight]
    reason = None
    if breaches:
        reason = breaches[0]["reason"] + (f" (and {len(breaches) - 1} more in {FILE})" if len(breaches) > 1 else "")
    return {"withdrawn": bool(breaches), "reason": reason, "rule": dict(rule), "breaches": breaches,
            "largest": {k: {"value": round(v, 4), "where": at} for k, (v, at) in worst.items()},
            "preflight_checked": bool(rule["containment"] and preflight), "files": files}


def write(out_dir: Path, record: dict) -> None:
    write_json(Path(out_dir) / FILE, record)


def withdrawn_text(record: dict) -> str:
    return f"withdrawn by rule: {record['reason']}"


def passed_text(record: dict) -> str:
    """One sentence for a table that passed: the rule and the largest shares it measured."""
    rule, largest = record["rule"], record["largest"]
    shares = "; ".join(f"largest {name} {largest[key]['value']:.3f} ({largest[key]['where']}), bound "
                       f"{rule['max_' + key]}" for key, name in (("re_share", "RE share"),
                                                                 ("backstop_share", "backstop share"))
                       if largest[key]["where"] is not None)
    preflight = ("the preflight's containment probe held" if record["preflight_checked"] else
                 "no preflight record given" if rule["containment"] else "containment not required")
    return (f"Withdrawal rule (`science.withdraw_if`, registered with the config), checked before this table was "
            f"rendered: passed ({shares}; {preflight}).")


def record_withdrawal(registry_path: str | Path, registration: dict, reason: str, date: str) -> bool:
    """Move a withdrawn run's registration from next to withdrawn, with the rule's reason; False when it is
    there already (a page published again). Its seeds are then never reported."""
    return move_from_next(registry_path, registration, "withdrawn", "registered_at", lambda e: {
        "seeds": e["seeds"], "experiment": e["experiment"], "date": date, "registered_at": e["commit"],
        "config_sha256": e["config_sha256"], **init_seed_of(e), "note": withdrawn_text({"reason": reason})},
        "their withdrawal cannot be recorded")
