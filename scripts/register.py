"""Register each config's `science.seeds` (and its shared init's `science.init_seed`) for the next report in
docs/registry.yaml, at this checkout's commit and the config's sha256; or, with --check, refuse in one line
(exit 1) to start a run whose seeds are not registered at this code and config (`make science` checks before
its first job).

    python scripts/register.py config.yaml configs/control-*.yaml     # then commit docs/registry.yaml
    python scripts/register.py --check config.yaml configs/control-*.yaml
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ewa.analysis.registry import REGISTRY_FILE, RegistryError, check_ready, register
from ewa.config import ConfigError, load
from ewa.io import code_version

ROOT = Path(__file__).resolve().parent.parent


def experiment_name(path: Path) -> str:
    """The config's path from the repository's root, as the registry names the experiment."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def one_init_seed(experiments: dict[str, dict]) -> None:
    """A report's runs (a study and its controls) start from one init: the configs registered together name
    one init seed, or none does."""
    named = {name: c["science"].get("init_seed") for name, c in experiments.items()}
    if len(set(named.values())) > 1:
        raise RegistryError("registry: the configs of one report name different science.init_seed values ("
                            + ", ".join(f"{n}: {s}" for n, s in named.items()) + "); its runs start from one init")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("configs", type=Path, nargs="+", help="experiment config files (their science.seeds)")
    p.add_argument("--check", action="store_true", help="only check that a run of these configs may start")
    p.add_argument("--registry", type=Path, default=ROOT / REGISTRY_FILE)
    args = p.parse_args()
    try:
        experiments = {experiment_name(path): load(path) for path in args.configs}
        one_init_seed(experiments)
        code = code_version()
        if code["commit"] is None:
            raise RegistryError(f"registry: {ROOT} is not the git checkout ewa runs from; nothing ties outputs to a "
                                "commit")
        if args.check:
            check_ready(args.registry, experiments, code["commit"], code["dirty"], ROOT)
            print(f"registered: {', '.join(experiments)} at {code['commit'][:10]}")
            return
        changed = [d for d in code["dirty"] if not d.startswith("docs/")]
        if changed:
            raise RegistryError(f"registry: uncommitted changes ({', '.join(changed[:3])}); commit the code "
                                "the seeds must run at first")
        for entry in register(args.registry, experiments, code["commit"]):
            init = f" from init seed {entry['init_seed']}" if "init_seed" in entry else ""
            print(f"registered {entry['experiment']}: seeds {entry['seeds']}{init} at {entry['commit'][:10]}, "
                  f"config sha256 {entry['config_sha256'][:12]}")
        print(f"now commit {args.registry.relative_to(ROOT) if args.registry.is_relative_to(ROOT) else args.registry} "
              "(nothing else) and run make science")
    except (ConfigError, RegistryError) as e:
        sys.exit(f"register.py: {e}")


if __name__ == "__main__":
    main()
