# Config validation at parse time (one line naming the bad key) and small input functions.
import json
import re

from ewa.config import ConfigError, validate
from ewa.merge import ALPHA_TAG_PATTERN, alpha_tag

try:
    config = validate(config)
except ConfigError as e:
    raise WorkflowError(str(e)) from None

REGIMES = [r["name"] for r in config["regimes"]]
ALPHAS = {alpha_tag(a): a for a in config["merge"]["alphas"]}
BENCHMARKS = list(config["benchmarks"])
SETTINGS = config["sample"]["settings"]


wildcard_constraints:
    regime="|".join(REGIMES),
    tag=ALPHA_TAG_PATTERN,
    benchmark="|".join(BENCHMARKS),
    setting="|".join(SETTINGS),


def as_json(value):
    return json.dumps(value, sort_keys=True)


def dataset_params(wildcards):
    spec = config["train_data"] if wildcards.get("benchmark") is None else config["benchmarks"][wildcards.benchmark]
    return as_json({**spec, "seed": config["seed"]})


def gpus(wildcards, resources):
    """GPUs this job was given: profiles set `gpu` (or a gres like gpu:h100:8); the miniature none."""
    if resources.get("gpu"):
        return int(resources["gpu"])
    match = re.search(r"gpu(?::[\w.]+)?:(\d+)", str(resources.get("gres", "")))
    return int(match[1]) if match else 0


def calibration_input(wildcards):
    return ["results/calibration.json"] if config["sandbox"]["calibrate"] else []


def sandbox_flags(wildcards, input):
    """The sandbox options every judging job passes: backend, interpreter, time-limit factor.
    Backend "auto" is resolved by the job itself, on the machine that runs it."""
    sb = config["sandbox"]
    limits = f"--calibration {input.calibration[0]}" if sb["calibrate"] else "--time-factor 1.0"
    return f"--sandbox-backend {sb['backend']} --python {sb['python']} {limits}"


def sandbox_settings(wildcards, input):
    """The same sandbox options as JSON, for stages that take them as one argument (training)."""
    sb = config["sandbox"]
    options = {"backend": sb["backend"], "python": sb["python"], "docker_image": sb["docker_image"]}
    if sb["calibrate"]:
        return as_json({**options, "calibration_path": input.calibration[0]})
    return as_json({**options, "time_factor": 1.0})


def regime_spec(wildcards):
    # Only this regime's own entry, so editing one regime retrains only that regime.
    return as_json([r for r in config["regimes"] if r["name"] == wildcards.regime])


def alpha_of(wildcards):
    return ALPHAS[wildcards.tag]


def merged_model(wildcards):
    return f"results/merged/alpha{wildcards.tag}"


def frontier_targets():
    # The claims compare the trained endpoints, so they need alphas 0 and 1 in the grid.
    endpoints = {0.0, 1.0} <= set(ALPHAS.values())
    tables = expand(
        "results/frontier/{benchmark}/{setting}/{table}.csv",
        benchmark=BENCHMARKS,
        setting=SETTINGS,
        table=["frontier", "claims"] if endpoints else ["frontier"],
    )
    return tables + expand("results/approaches/{benchmark}/{setting}.csv", benchmark=BENCHMARKS, setting=SETTINGS)


def frontier_evals(wildcards):
    return expand(
        "results/evals/alpha{tag}/{benchmark}/{setting}.parquet",
        tag=ALPHAS,
        benchmark=wildcards.benchmark,
        setting=wildcards.setting,
    )


def frontier_samples(wildcards):
    return expand(
        "results/samples/alpha{tag}/{benchmark}/{setting}.jsonl",
        tag=ALPHAS,
        benchmark=wildcards.benchmark,
        setting=wildcards.setting,
    )


def frontier_eval_args(wildcards, input):
    return " ".join(f"alpha={ALPHAS[t]}:{p}" for t, p in zip(ALPHAS, input.evals))


def frontier_sample_args(wildcards, input):
    return " ".join(f"alpha={ALPHAS[t]}:{p}" for t, p in zip(ALPHAS, input.samples))
