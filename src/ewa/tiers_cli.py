"""`ewa tiers`: write the nested coverage tiers of a problems file (one file target per benchmark)."""
from __future__ import annotations

import argparse
import json

from ewa.problems import read_problems
from ewa.tiers import write_tiers


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--problems", required=True)
    p.add_argument("--regimes", required=True, help='JSON list, e.g. [{"name":"low","fraction":0.5}, ...]')
    p.add_argument("--out", required=True)


def run(args: argparse.Namespace) -> int:
    write_tiers(read_problems(args.problems), json.loads(args.regimes), args.out)
    return 0
