"""The bundled miniature problem set: stdin/stdout families whose brute force is correct but too slow.

Each family yields instances (one per parameter value; train and held-out values are disjoint) with
tests from tiny to large, a brute-force, an efficient and plausible-but-wrong reference programs.
"""
from ewa.data.mini.build import FAMILIES, SPLITS, Instance, build, build_problem, corpus_texts, instances
from ewa.data.mini.family import Family, run_source
from ewa.data.mini.format import FORMAT

__all__ = ["FORMAT", "FAMILIES", "SPLITS", "Family", "Instance", "build", "build_problem", "corpus_texts", "instances",
           "run_source"]
