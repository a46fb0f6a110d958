# Config validation at parse time (one line naming the bad key), the config slice each job reads, and
# small input functions. Every job gets its slice of the validated config the same way:
# `ewa COMMAND --config {params.config:q}`. A slice holds only what that job reads, so editing one part
# of the config reruns only the jobs it shapes.
import json
import os
import re
from pathlib import Path

from ewa.alphas import ALPHA_TAG_PATTERN, alpha_spec, alpha_tag
from ewa.analysis.claims import OUTPUT_FILES as CLAIMS_FILES
from ewa.analysis.families import output_files as families_files
from ewa.analysis.frontier import output_files as frontier_files
from ewa.analysis.registry import REGISTRY_FILE, experiment_sha256
from ewa.analysis.science import OUTPUT_FILES as SCIENCE_FILES
from ewa.capabilities import refusal, warm_start_refusal
from ewa.config import ConfigError, validate
from ewa.data import input_error, verifies
from ewa.families import INIT, POINT_TAG_PATTERN, family_spec, merge_plan, model_points
from ewa.hub import HubError, localized, pinned, resolve_config
from ewa.io import EXPERIMENT_ENV
from ewa import trackers

try:
    config = validate(config)
except ConfigError as e:
    raise WorkflowError(str(e)) from None


def configfile_arg():
    """The experiment's file as the user gave it, for the commands a message suggests."""
    path = Path(workflow.configfiles[-1]).absolute() if workflow.configfiles else Path("config.yaml").absolute()
    return os.path.relpath(path) if path.is_relative_to(Path.cwd()) else str(path)


# model.init and data inputs naming a Hugging Face repository are read from the local Hugging Face cache only
# (ewa.hub; `ewa stage` downloads them on a login node): one missing, or only in part, stops the plan in one
# line naming the staging command. The config then holds each at its commit, hf://OWNER/NAME@<commit>, so the
# experiment's sha256 and every job's slice name the revision; a config of local paths is left as it is.
try:
    HUB = resolve_config(config, configfile=configfile_arg())
except HubError as e:
    raise WorkflowError(str(e)) from None
config = pinned(config, HUB)

# Every job's provenance names the whole experiment it belongs to, not only the slice it read: jobs inherit
# this (a cluster job parses the workflow again and sets it the same way). `ewa science` compares it with
# the registered config's (ewa.analysis.registry).
os.environ[EXPERIMENT_ENV] = experiment_sha256(config)
# The pre-registration record of this checkout, whatever --directory the run writes into.
REGISTRY = os.path.join(workflow.basedir, REGISTRY_FILE)


def local_path_error(config):
    """The first local path the config names that is not there, as one line (None if all are): the schema
    checks only that they are text, and a missing model or dataset would otherwise stop a job mid-run."""
    init = config["model"]["init"]
    if init != "tiny" and not os.path.isdir(init):
        return f"config: key 'model.init': {init}: " + ("not a directory" if os.path.exists(init) else "no such directory")
    datasets = {"train_data": config["train_data"]}
    datasets.update({f"benchmarks.{name}": spec for name, spec in config["benchmarks"].items()})
    for key, spec in datasets.items():
        why = input_error(spec)
        if why:
            return f"config: key '{key}.input': {why}"
    return None


# What the checks read: each hub reference as its path in the cache.
LOCAL = localized(config, HUB)
if path_error := local_path_error(LOCAL):
    raise WorkflowError(path_error)
# A tracker (grpo.report_to, model.sft.report_to) that is not installed is refused now, not in the job.
if tracker_error := trackers.config_error(config):
    raise WorkflowError(tracker_error)
# A setting the model's chat template cannot render or parse, or a warm start (model.sft) it cannot train, is
# refused now, not after hours of training (ewa.capabilities reads its tokenizer files; a directory without
# them yet is left to the jobs, and to the preflight). Jobs parse the workflow again: the run checked it already.
if workflow.is_main_process and (refused := refusal(LOCAL["model"]["init"], config["sample"]["settings"],
                                                    config["sample"], staged_ok=True)
                                 or warm_start_refusal(LOCAL["model"]["init"], config["model"]["sft"], staged_ok=True)):
    raise WorkflowError(refused.line())

REGIMES = [r["name"] for r in config["regimes"]]
ALPHAS = {alpha_tag(a): a for a in config["merge"]["alphas"]}
BENCHMARKS = list(config["benchmarks"])
SETTINGS = config["sample"]["settings"]
# The claims compare the trained endpoints, so they need alphas 0 and 1 in the grid.
ENDPOINTS = {0.0, 1.0} <= set(ALPHAS.values())
# merge.families (ewa.families): every model of every family by tag, each once. A point on the low-high line is
# an alpha (merged by rule merge, and only ALPHAS make the line's frontier); any other is @SOURCE+W,... (rule
# merge_point), or a source itself (@init+1.00: the init is sampled where it is, nothing merged).
FAMILIES = bool(config["merge"].get("families"))
POINTS = model_points(config)
MERGE_ALPHAS = {**ALPHAS, **{tag: p.weight(config["merge"]["high"]) for tag, p in POINTS.items() if tag[0] != "@"}}
OFF_LINE = {tag: p for tag, p in POINTS.items() if tag[0] == "@"}


wildcard_constraints:
    seed=r"\d+",
    regime="|".join(REGIMES),
    tag=ALPHA_TAG_PATTERN + (f"|{POINT_TAG_PATTERN}" if OFF_LINE else ""),
    benchmark="|".join(map(re.escape, BENCHMARKS)),
    setting="|".join(SETTINGS),


def as_json(value):
    return json.dumps(value, sort_keys=True)


def job_config(wildcards, **sections):
    """A job's config slice: the given sections, plus the replicate's seed when the job has one."""
    seed = {"seed": int(wildcards.seed)} if "seed" in wildcards.keys() else {}
    return as_json({**sections, **seed})


def dataset_entry(wildcards):
    return config["train_data"] if wildcards.dataset == "_train" else config["benchmarks"][wildcards.dataset]


def verifying(wildcards):
    """Whether preparing this dataset runs its bundled solutions in the sandbox (verify_solutions)."""
    return verifies(dataset_entry(wildcards))


def data_config(wildcards):
    """The dataset entry, and the sandbox when it verifies solutions. verify_solutions is left out where
    it has no effect (a format that ships no solutions), so it reruns nothing."""
    entry = dict(dataset_entry(wildcards))
    if not verifying(wildcards):
        entry.pop("verify_solutions", None)
    sandbox = {"sandbox": config["sandbox"]} if verifying(wildcards) else {}
    if wildcards.dataset == "_train":
        return job_config(wildcards, train_data=entry, **sandbox)
    return job_config(wildcards, benchmarks={wildcards.dataset: entry}, **sandbox)


def prepare_calibration(wildcards):
    return calibration_input(wildcards) if verifying(wildcards) else []


def prepare_threads(wildcards):
    """Sandbox workers of a prepare job that verifies solutions (the node's cores; profiles may set it)."""
    return workflow.cores if verifying(wildcards) else 1


def prepare_mem_mb(wildcards, threads):
    """A prepare job's memory: the streaming loader's (flat in the number of problems) and, when it
    verifies solutions, 512 MB per sandbox worker running one of them."""
    return 2000 + (512 * threads if verifying(wildcards) else 0)


def dataset_name(wildcards):
    return "train_data" if wildcards.dataset == "_train" else wildcards.dataset


def tiers_config(wildcards):
    return job_config(wildcards, regimes=config["regimes"])


def sandbox_config(wildcards):
    return job_config(wildcards, sandbox=config["sandbox"])


def init_sections():
    """The init's slice. A model directory is used as it is: only its path reaches the job, with the SFT
    that model.sft turns on explicitly (ewa.config). The sandbox runs the programs of the tool-use and
    agentic SFT traces."""
    model = config["model"]
    if model["init"] == "tiny":
        return {"model": model, "sandbox": config["sandbox"]}
    if not model["sft"]["steps"]:
        return {"model": {"init": model["init"]}}
    return {"model": {"init": model["init"], "sft": model["sft"]}, "sandbox": config["sandbox"]}


def init_config(wildcards):
    return job_config(wildcards, **init_sections())


def train_config(wildcards):
    # Only this regime's own entry, so editing one regime retrains only that regime.
    regime = [r for r in config["regimes"] if r["name"] == wildcards.regime]
    return job_config(wildcards, grpo=config["grpo"], sandbox=config["sandbox"], regimes=regime)


def merge_config(wildcards):
    # Not the alpha grid: adding an alpha builds only that alpha.
    return job_config(wildcards, merge={k: config["merge"][k] for k in ("device", "max_shard_size")})


def sample_config(wildcards):
    # Not the list of settings: adding a setting samples only that setting.
    sample = {k: v for k, v in config["sample"].items() if k != "settings"}
    return job_config(wildcards, sample=sample, sandbox=config["sandbox"])


def evaluate_config(wildcards):
    judging = {k: config["evaluate"][k] for k in ("early_stop", "judge_duplicates", "verdict_cache")}
    return job_config(wildcards, evaluate=judging, sandbox=config["sandbox"])


def analysis_config(wildcards):
    return job_config(wildcards, evaluate=config["evaluate"])


def science_config(wildcards):
    # The science seeds and the design seeds (the report names both), and the demo's seed.
    return job_config(wildcards, science=config["science"], seed=config["seed"])


def max_k():
    return max(config["evaluate"]["k"] + [config["evaluate"]["budget"]])


def gpus(wildcards, resources):
    """GPUs this job was given: profiles set `gpu` (or a gres like gpu:h100:8); the miniature none."""
    if resources.get("gpu"):
        return int(resources["gpu"])
    match = re.search(r"gpu(?::[\w.]+)?:(\d+)", str(resources.get("gres", "")))
    return int(match[1]) if match else 0


def calibration_input(wildcards):
    """The calibration every job scales time limits by: this run's (rule calibrate), or the one
    sandbox.calibration names (the study's, for a control); none with `sandbox.calibrate: false`."""
    if not config["sandbox"]["calibrate"]:
        return []
    return [config["sandbox"].get("calibration") or "results/calibration.json"]


def calibration_flag(wildcards, input):
    """--calibration PATH where time limits are calibrated; with `sandbox.calibrate: false` the jobs
    take limits as they are (the sandbox section in their config says so)."""
    return f"--calibration {input.calibration}" if input.calibration else ""


def init_dir(seed):
    """The init a seed's GRPO runs and merges start from: another run's (science.init_from), the experiment's
    one init (science.init_seed, rule shared_init), or the seed's own (results/seed<N>/init, the demo's)."""
    science = config["science"]
    if science.get("init_from"):
        return science["init_from"]
    if science.get("init_seed") is not None:
        return f"results/init/seed{science['init_seed']}/model"
    return f"results/seed{seed}/init"


def train_init(wildcards):
    return init_dir(wildcards.seed)


def source_dir(seed, source):
    """The model directory of a family's source: the init or a regime's checkpoint."""
    return init_dir(seed) if source == INIT else f"results/seed{seed}/checkpoints/{source}"


def shared_input_error(config):
    """What another run made and this config names, when it cannot be used, as one line (None if it can):
    the calibration file, and the init, whose ewa_init.json must name this config's init seed and model
    section, so a control starts from the study's init or from none."""
    if path := config["sandbox"].get("calibration"):
        from ewa.sandbox.calibrate import read_calibration

        if not os.path.isfile(path):
            return f"config: key 'sandbox.calibration': {path}: no such file (run the experiment that measures it)"
        try:
            read_calibration(path)
        except ValueError as e:
            return f"config: key 'sandbox.calibration': {e}"
    if not (path := config["science"].get("init_from")):
        return None
    from ewa.config import section
    from ewa.init import PROVENANCE_FILE

    key, seed = "config: key 'science.init_from'", config["science"]["init_seed"]
    if not os.path.isdir(path):
        return f"{key}: {path}: no such directory (run the experiment that builds it first)"
    try:
        record = json.loads((Path(path) / PROVENANCE_FILE).read_text())
    except (OSError, ValueError):
        return f"{key}: {path}: no readable {PROVENANCE_FILE}, so not an init `ewa init` built"
    if record.get("seed") != seed:
        return f"{key}: {path} was built with seed {record.get('seed')}, not science.init_seed {seed}"
    built, expected = record.get("config") or {}, {**section("model", init_sections()["model"]), "seed": seed}
    if differ := sorted(k for k in set(built) | set(expected) if built.get(k) != expected.get(k)):
        return (f"{key}: {path} was built from another model section (model.{', model.'.join(differ)} differ "
                "from this config's)")
    return None


if shared_error := shared_input_error(config):
    raise WorkflowError(shared_error)


def off_line_point(wildcards):
    if wildcards.tag not in OFF_LINE:
        raise WorkflowError(f"model alpha{wildcards.tag} is no point of merge.families (ewa.families)")
    return OFF_LINE[wildcards.tag]


def merged_model(wildcards):
    """The model a sample job reads: its merge, or for a point that is one source (weight 1) that source."""
    if wildcards.tag in OFF_LINE and (source := OFF_LINE[wildcards.tag].single_source):
        return source_dir(wildcards.seed, source)
    return f"results/seed{wildcards.seed}/merged/alpha{wildcards.tag}"


def point_sources(wildcards):
    """A family point's inputs: the model directory of each source it weighs, base first."""
    base, rest = merge_plan(off_line_point(wildcards))
    return [source_dir(wildcards.seed, s) for s in (base, *(s for s, _ in rest))]


def point_source_args(wildcards, input):
    """`--source W:DIR` per source of the point, base first (input order)."""
    point = off_line_point(wildcards)
    base, rest = merge_plan(point)
    weights = [point.weight(base), *(w for _, w in rest)]
    return " ".join(f"--source={w!r}:{d}" for w, d in zip(weights, input, strict=True))  # = : a weight may be negative


def merged_output(path):
    """A merged model is only read by the sample jobs of its alpha: with merge.temp (the default) Snakemake
    deletes it once the last of them is done, so the disk holds only the alphas still being sampled."""
    return temp(directory(path)) if config["merge"]["temp"] else directory(path)


def merge_alphas_per_job():
    """Alphas one merge job writes from one read of the two checkpoints: `alphas_per_job` in the profile's
    set-resources for merge (default 1, a job per alpha). Machine sizing like the merge's GPU, but read
    when the workflow is parsed: it decides which jobs exist."""
    setting = (workflow.resource_settings.overwrite_resources.get("merge") or {}).get("alphas_per_job")
    try:
        per_job = getattr(setting, "value", setting)
    except ValueError:  # an expression, which only a job could evaluate
        per_job = getattr(setting, "raw", setting)
    if per_job is None:
        return 1
    if not isinstance(per_job, int) or per_job < 1:
        raise WorkflowError(f"set-resources merge:alphas_per_job: expected a whole number >= 1, got {per_job!r}")
    return per_job


def merge_chunks(per_job):
    """The alpha grid in ascending order, cut into runs of `per_job` alphas, one merge job each (rules/merge.smk).
    Fixed by the grid alone, so a chunk's outputs are stable. Adding an alpha re-forms the chunks from it on,
    and the chunk that holds it is merged again: Snakemake then samples that chunk's other alphas again too (a
    job that runs updates all its outputs), so chunk a grid you do not mean to extend."""
    tags = sorted(MERGE_ALPHAS, key=MERGE_ALPHAS.get)
    return [tags[i:i + per_job] for i in range(0, len(tags), per_job)] if per_job > 1 else []


def share_merge_settings(rules):
    """The profile's set-resources and set-threads for merge, given to the chunk rules that stand in for it
    under names of their own. Snakemake looks these up when it defines a rule: this runs before any is."""
    settings = workflow.resource_settings
    for overrides in (settings.overwrite_resources, settings.overwrite_threads):
        if "merge" in overrides:
            overrides.update({rule: overrides["merge"] for rule in rules})


MERGE_CHUNKS = merge_chunks(merge_alphas_per_job())
share_merge_settings([f"merge_chunk{number}" for number in range(1, len(MERGE_CHUNKS) + 1)])


def chunk_alphas(wildcards, output):
    """`--alphas` of a chunk job, from its outputs: derived from them, so how the grid is cut is not a
    parameter Snakemake would rerun finished merges for."""
    return " ".join(repr(MERGE_ALPHAS[os.path.basename(o)[len("alpha"):]]) for o in output)


def chunk_out_pattern(wildcards, output):
    return f"results/seed{wildcards.seed}/merged/alpha{{alpha}}"


def grid_files(pattern):
    """An input function: the file of every alpha for this job's seed, benchmark and setting."""
    def files(wildcards):
        return [pattern.format(seed=wildcards.seed, tag=tag, benchmark=wildcards.benchmark,
                               setting=wildcards.setting) for tag in ALPHAS]
    return files


frontier_evals = grid_files("results/seed{seed}/evals/alpha{tag}/{benchmark}/{setting}.parquet")
frontier_samples = grid_files("results/seed{seed}/samples/alpha{tag}/{benchmark}/{setting}.jsonl")


def alpha_specs(paths):
    """`alpha=A:PATH` per grid file (ALPHAS and the grid files are in the same order)."""
    return " ".join(alpha_spec(a, p) for a, p in zip(ALPHAS.values(), paths, strict=True))


def frontier_eval_args(wildcards, input):
    return alpha_specs(input.evals)


def frontier_sample_args(wildcards, input):
    return alpha_specs(input.samples)


def front_claims(wildcards):
    if not ENDPOINTS:
        return []
    return expand("results/seed{seed}/claims/{benchmark}/{setting}/claims.csv", seed=wildcards.seed,
                  benchmark=BENCHMARKS, setting=SETTINGS)


def front_claims_args(wildcards):
    return " ".join(f"{Path(c).parent.parent.name}/{Path(c).parent.name}={Path(c).parent}" for c in front_claims(wildcards))


def front_config(wildcards):
    return job_config(wildcards, model=config["model"], regimes=config["regimes"], merge=config["merge"],
                      benchmarks=config["benchmarks"], sample=config["sample"])


def front_page_path():
    """The report's front page: this run's, once built; before that, the static description."""
    built = Path(f"results/seed{config['seed']}/report/front.rst").resolve()
    return str(built) if built.is_file() else "report/workflow.rst"


def seed_targets(seed):
    """Everything one replicate of the study produces."""
    tables = expand("results/seed{seed}/frontier/{benchmark}/{setting}/frontier.csv", seed=seed,
                    benchmark=BENCHMARKS, setting=SETTINGS)
    tables.append(f"results/seed{seed}/report/front.rst")
    tables.append(f"results/seed{seed}/training/training.csv")  # the training figures (rule training)
    tables += expand("results/seed{seed}/approaches/{benchmark}/{setting}/approaches.csv", seed=seed,
                     benchmark=BENCHMARKS, setting=SETTINGS)
    if ENDPOINTS:
        tables += expand("results/seed{seed}/claims/{benchmark}/{setting}/claims.csv", seed=seed,
                         benchmark=BENCHMARKS, setting=SETTINGS)
    if FAMILIES:
        tables += expand("results/seed{seed}/families/{benchmark}/{setting}/comparison.csv", seed=seed,
                         benchmark=BENCHMARKS, setting=SETTINGS)
    return tables


def family_evals(wildcards):
    """Every family point's evaluation table for this job's seed, benchmark and setting, each once."""
    return [f"results/seed{wildcards.seed}/evals/alpha{tag}/{wildcards.benchmark}/{wildcards.setting}.parquet"
            for tag in POINTS]


def family_eval_args(wildcards, input):
    """`point=TAG:PATH` per point (POINTS and family_evals are in the same order)."""
    return " ".join(f"point={tag}:{path}" for tag, path in zip(POINTS, input.evals, strict=True))


def families_spec(wildcards):
    # A parameter: adding a point reruns this comparison (and builds only that point's jobs before it).
    return as_json(family_spec(config))


def science_seed_dirs(kind, name=None):
    """An input function: each science seed's `name` (default: {kind}.csv) under its {kind} directory."""
    def dirs(wildcards):
        return [f"results/seed{s}/{kind}/{wildcards.benchmark}/{wildcards.setting}/{name or kind + '.csv'}"
                for s in config["science"]["seeds"]]
    return dirs


def alpha_of(wildcards):
    return MERGE_ALPHAS[wildcards.tag]


def parent_dirs(key):
    """A params function: the directories of the input files under `key`, space-separated."""
    def dirs(wildcards, input):
        return " ".join(os.path.dirname(p) for p in input[key])
    return dirs
