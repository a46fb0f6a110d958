"""Pre-registration a machine can check. docs/registry.yaml lists every seed set a report has shown, and
the seeds registered for the next report with the commit and experiment config they must run at.
`ewa science --registry` refuses, in one line, a seed that a report has already shown, one that is not
registered, and one whose outputs' provenance (ewa.io.provenance: the code's commit and the experiment's
config hash) is not the registered commit and config. A report shows every seed of its registration or
none, so a bad seed cannot be dropped.

The registered commit is the code's: outputs made at a later commit that differs from it only under docs/
(the registry's own commit, a results page) match it, and so do uncommitted changes under docs/.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import re
import subprocess
from pathlib import Path

import yaml

from ewa.errors import UserError
from ewa.io import write_text

# The registry of the checkout the workflow runs from; `ewa science --registry` takes any path.
REGISTRY_FILE = Path("docs") / "registry.yaml"
# Paths whose changes do not change what runs: documentation, the results pages and the registry itself.
NOT_CODE = "docs/"
SECTIONS = ("reports", "withdrawn", "next")

HEADER = """\
# Pre-registration, checked by machine (src/ewa/analysis/registry.py; docs/results.md#pre-registration).
# reports: every seed set whose results a report showed, oldest first. A seed in any of them, or in a
#   withdrawn registration, is never reported again: `ewa science` refuses it.
#   ran_at: the commit the runs were made at (null: not recorded); published: the commit that put the
#   tables in the repository (null: the commit that added the entry); config_sha256: the experiment
#   config's hash (null before the registry recorded it).
# withdrawn: registrations abandoned before a report; their seeds may have been looked at.
# next: the seeds registered for the next report, one entry per experiment config, with the commit and
#   the config sha256 they must run at. Written by scripts/register.py; moved to reports by
#   scripts/science.py when it publishes their tables.
# init_seed: the seed of the experiment's one shared init (science.init_seed), which every seed of the
#   entry starts from; the study and its controls share it. Never a seed a report has shown.
"""


class RegistryError(UserError):
    """A seed the registry does not allow to be reported; the message names the seed and why."""


def experiment_sha256(config: dict) -> str:
    """The sha256 of a validated experiment config's canonical JSON (sorted keys, no spaces): what every
    job's provenance records as `experiment_sha256` (the workflow sets it) and what a registration names."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def read_registry(path: str | Path) -> dict:
    """The registry's three sections, each a list of entries with their seeds; one line if malformed."""
    path = Path(path)
    if not path.is_file():
        raise RegistryError(f"registry: {path}: no such file")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise RegistryError(f"registry: {path} is not valid YAML ({e.__class__.__name__})") from None
    if not isinstance(raw, dict) or set(raw) - set(SECTIONS):
        raise RegistryError(f"registry: {path} must hold a mapping with only {', '.join(SECTIONS)}")
    registry = {name: list(raw.get(name) or []) for name in SECTIONS}
    for name, entries in registry.items():
        for i, entry in enumerate(entries):
            seeds = entry.get("seeds") if isinstance(entry, dict) else None
            if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds):
                raise RegistryError(f"registry: {path}: {name}[{i}] needs seeds, a list of integers")
            if not isinstance(entry.get("init_seed", 0), int):
                raise RegistryError(f"registry: {path}: {name}[{i}]: init_seed must be an integer")
    for i, entry in enumerate(registry["next"]):
        missing = [k for k in ("experiment", "commit", "config_sha256") if not entry.get(k)]
        if missing:
            raise RegistryError(f"registry: {path}: next[{i}] needs {', '.join(missing)}")
    return registry


def write_registry(path: str | Path, registry: dict) -> None:
    body = yaml.safe_dump({name: registry[name] for name in SECTIONS}, sort_keys=False, default_flow_style=None,
                          width=110, allow_unicode=True)
    write_text(path, HEADER + body)


def shown_before(registry: dict, seed: int) -> str | None:
    """Where `seed` was shown before, for a message: the first report (or withdrawn registration) holding it."""
    for name, how in (("reports", "reported before"), ("withdrawn", "in a withdrawn registration")):
        for entry in registry[name]:
            if seed in entry["seeds"]:
                at = entry.get("published") or entry.get("ran_at") or entry.get("registered_at")
                return f"{how} ({entry.get('date') or 'undated'}" + (f", {str(at)[:7]}" if at else "") + ")"
    return None


def init_seed_error(registry: dict, name: str, config: dict) -> str | None:
    """Why the experiment's shared init seed (science.init_seed) may not run, for a message; None if it may
    or there is none. The init of seed N is what a seed-N replicate built as its own, so a seed a report
    showed is no fresh init; an init seed is no other experiment's report seed either. Experiments that
    share an init (a study and its controls) share its seed."""
    init_seed = config["science"].get("init_seed")
    if init_seed is None:
        return None
    if (earlier := shown_before(registry, init_seed)) is not None:
        return f"{name}: init seed {init_seed} was {earlier}; choose an init seed no report has shown"
    taken = [e["experiment"] for e in registry["next"] if init_seed in e["seeds"]]
    if taken:
        return f"{name}: init seed {init_seed} is registered as a report seed of {taken[0]}"
    # a control that starts from the study's init names its directory: it must be this init seed's
    named = re.search(r"(?:^|/)init/seed(\d+)(?:/|$)", str(config["science"].get("init_from") or ""))
    if named and int(named[1]) != init_seed:
        return (f"{name}: science.init_from {config['science']['init_from']} is the init of seed {named[1]}, "
                f"not of init seed {init_seed}")
    return None


def code_differs(registered: str, made_at: str, repo: Path) -> str | None:
    """Why code at `made_at` is not the registered commit's (None if it is the same commit, or differs
    only under docs/): the first changed path, or git's complaint."""
    if registered == made_at:
        return None
    try:
        done = subprocess.run(["git", "--no-optional-locks", "-C", str(repo), "diff", "--name-only", registered,
                               made_at, "--", ":(top)", f":(top,exclude){NOT_CODE}"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return f"git could not compare the commits ({e.__class__.__name__})"
    if done.returncode != 0:
        return f"git could not compare the commits in {repo} ({(done.stderr.strip().splitlines() or ['?'])[-1]})"
    changed = done.stdout.split()
    return f"{len(changed)} file(s) outside {NOT_CODE} differ, e.g. {changed[0]}" if changed else None


def _provenance(directory: Path) -> dict:
    path = directory / "provenance.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing (that step has not run)")
    return json.loads(path.read_text())


def check_run(registration: dict, seed: int, directory: Path, repo: Path) -> None:
    """One output directory's provenance against the registration; one line naming what differs."""
    record = _provenance(directory)
    code = record.get("code") or {}
    where = f"seed {seed}: {directory / 'provenance.json'}"
    if not code.get("commit"):
        raise RegistryError(f"registry: {where} names no commit (made outside a git checkout, or before provenance "
                            "recorded one); rerun it")
    dirty = [p for p in code.get("dirty") or [] if not p.startswith(NOT_CODE)]
    if dirty:
        raise RegistryError(f"registry: {where} was made from a checkout with uncommitted changes "
                            f"({', '.join(dirty[:3])}{', ...' if len(dirty) > 3 else ''}); commit them, register "
                            "that commit and rerun")
    if why := code_differs(registration["commit"], code["commit"], repo):
        raise RegistryError(f"registry: {where} was made at commit {code['commit'][:10]}, not at the registered "
                            f"{registration['commit'][:10]} ({why})")
    made = record.get("experiment_sha256")
    if made != registration["config_sha256"]:
        raise RegistryError(f"registry: {where} was made with experiment config sha256 {str(made)[:12]}, not the "
                            f"registered {registration['config_sha256'][:12]} ({registration['experiment']})")


def check(registry_path: str | Path, runs: list[tuple[int, Path, Path]], repo: str | Path | None = None) -> dict:
    """The registration that every run (seed, claims dir, approaches dir) matches; RegistryError naming the
    first seed that a report has shown, that is not registered, or whose outputs do not match. `repo`: the
    git checkout the commits are compared in (default: the one the registry lives in)."""
    registry = read_registry(registry_path)
    repo = Path(repo) if repo else Path(registry_path).resolve().parent
    seeds = [seed for seed, _, _ in runs]
    for seed in seeds:
        if (earlier := shown_before(registry, seed)) is not None:
            raise RegistryError(f"registry: seed {seed} was {earlier[:-1]}; {registry_path}); report seeds no report "
                                "has shown")
    registrations = {id(e): e for seed in seeds for e in registry["next"] if seed in e["seeds"]}
    unregistered = [s for s in seeds if not any(s in e["seeds"] for e in registry["next"])]
    if unregistered:
        raise RegistryError(f"registry: seed(s) {unregistered} are not registered for the next report in "
                            f"{registry_path} (scripts/register.py)")
    if len(registrations) > 1:
        raise RegistryError(f"registry: seeds {seeds} belong to {len(registrations)} registrations; report each "
                            "experiment's seeds on their own")
    (registration,) = registrations.values()
    if sorted(seeds) != sorted(registration["seeds"]):
        raise RegistryError(f"registry: {registration['experiment']} registered seeds {registration['seeds']}, "
                            f"this report has {seeds}: a report shows every registered seed")
    for seed, claims_dir, approaches_dir in runs:
        for directory in (claims_dir, approaches_dir):
            check_run(registration, seed, Path(directory), repo)
    return {"registry": str(registry_path), **{k: registration[k] for k in ("experiment", "seeds", "commit",
                                                                          "config_sha256")}}


def move_from_next(registry_path: str | Path, registration: dict, to: str, ran_key: str, entry, why: str) -> bool:
    """Move a registration (as check() returned it) from `next` to section `to`, as `entry(found)` writes it
    (`ran_key` names the commit it ran at there); False if `to` holds it already (a page published again),
    RegistryError if it is in neither (`why` ends that line)."""
    registry = read_registry(registry_path)
    key = lambda e: (sorted(e["seeds"]), e.get("commit", e.get(ran_key)), e.get("config_sha256"))  # noqa: E731
    if any(key(e) == key(registration) for e in registry[to]):
        return False
    found = next((e for e in registry["next"] if key(e) == key(registration)), None)
    if found is None:
        raise RegistryError(f"registry: seeds {registration['seeds']} at {registration['commit'][:10]} are not "
                            f"registered in {registry_path}; {why}")
    registry["next"].remove(found)
    registry[to].append(entry(found))
    write_registry(registry_path, registry)
    return True


def init_seed_of(entry: dict) -> dict:
    return {"init_seed": entry["init_seed"]} if "init_seed" in entry else {}


def record_report(registry_path: str | Path, registration: dict, date: str | None = None) -> bool:
    """Move a registration (as check() returned it) from next to reports, dated; False if it is already
    there (a page published again), RegistryError if it is in neither."""
    return move_from_next(registry_path, registration, "reports", "ran_at", lambda e: {
        "seeds": e["seeds"], "experiment": e["experiment"], "date": date or datetime.date.today().isoformat(),
        "ran_at": e["commit"], "published": None, "config_sha256": e["config_sha256"], **init_seed_of(e),
        "note": e.get("note") or ""}, "their tables cannot be published")


def register(registry_path: str | Path, experiments: dict[str, dict], commit: str,
             date: str | None = None) -> list[dict]:
    """Register each experiment's `science.seeds` (name -> validated config) for the next report at
    `commit`, with its shared init's seed (science.init_seed) where it has one, replacing that experiment's
    earlier registration; RegistryError for a seed already shown."""
    registry = read_registry(registry_path)
    entries = []
    for name, config in experiments.items():
        seeds = list(config["science"]["seeds"])
        for seed in seeds:
            if (earlier := shown_before(registry, seed)) is not None:
                raise RegistryError(f"registry: {name}: seed {seed} was {earlier}; choose seeds no report has "
                                    "shown")
            taken = [e["experiment"] for e in registry["next"] if seed in e["seeds"] and e["experiment"] != name]
            taken += [e["experiment"] for e in registry["next"]
                      if seed == e.get("init_seed") and e["experiment"] != name]
            if taken:
                raise RegistryError(f"registry: {name}: seed {seed} is registered for {taken[0]} already")
        registry["next"] = [e for e in registry["next"] if e["experiment"] != name]
        if why := init_seed_error(registry, name, config):
            raise RegistryError(f"registry: {why}")
        init_seed = config["science"].get("init_seed")
        shared = {"init_seed": init_seed} if init_seed is not None else {}
        entries.append({"experiment": name, "seeds": seeds, **shared, "commit": commit,
                        "config_sha256": experiment_sha256(config), "date": date or datetime.date.today().isoformat()})
        registry["next"].append(entries[-1])
    write_registry(registry_path, registry)
    return entries


def check_ready(registry_path: str | Path, experiments: dict[str, dict], commit: str, dirty: list[str],
                repo: str | Path) -> None:
    """Before a run: each experiment's seeds registered at this code and config, none shown before, and no
    uncommitted change outside docs/ (the outputs would name a commit that is not their code)."""
    registry = read_registry(registry_path)
    changed = [p for p in dirty if not p.startswith(NOT_CODE)]
    if changed:
        raise RegistryError(f"registry: uncommitted changes ({', '.join(changed[:3])}"
                            f"{', ...' if len(changed) > 3 else ''}); commit them and register that commit "
                            "(scripts/register.py)")
    for name, config in experiments.items():
        seeds = list(config["science"]["seeds"])
        for seed in seeds:
            if (earlier := shown_before(registry, seed)) is not None:
                raise RegistryError(f"registry: {name}: seed {seed} was {earlier}; set new science.seeds and "
                                    "register them (scripts/register.py)")
        entry = next((e for e in registry["next"] if e["experiment"] == name), None)
        if entry is None or sorted(entry["seeds"]) != sorted(seeds):
            raise RegistryError(f"registry: {name}: seeds {seeds} are not registered for the next report in "
                                f"{registry_path} (scripts/register.py)")
        init_seed = config["science"].get("init_seed")
        if entry.get("init_seed") != init_seed:
            raise RegistryError(f"registry: {name}: init seed {init_seed} is not the registered "
                                f"{entry.get('init_seed')} (scripts/register.py)")
        if why := init_seed_error(registry, name, config):
            raise RegistryError(f"registry: {why}")
        if why := code_differs(entry["commit"], commit, Path(repo)):
            raise RegistryError(f"registry: {name}: this checkout is at {commit[:10]}, not at the registered "
                                f"{entry['commit'][:10]} ({why})")
        if entry["config_sha256"] != experiment_sha256(config):
            raise RegistryError(f"registry: {name}: the config's sha256 is {experiment_sha256(config)[:12]}, not the "
                                f"registered {entry['config_sha256'][:12]}; register it again (scripts/register.py)")
