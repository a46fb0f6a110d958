# ewa: Extrapolative Weight Averaging — correctness-efficiency frontiers in code RL.
# Wiring only: the logic lives in the `ewa` package (src/ewa), each stage one rules/*.smk file.
from snakemake.utils import min_version

min_version("9.0")


# A --configfile is the whole experiment: config.yaml (the miniature) is only the default, so its
# benchmarks never leak into a paper run. --config still edits whichever config is in use.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


include: "rules/common.smk"
include: "rules/preflight.smk"
include: "rules/data.smk"
include: "rules/init.smk"
include: "rules/train.smk"
include: "rules/merge.smk"
include: "rules/sample.smk"
include: "rules/evaluate.smk"
include: "rules/analysis.smk"


# The report opens on this run's front page: the study, the config, the claims and their verdicts.
report: front_page_path()


# The config's replicate (seed): frontier, claims and approaches of every benchmark and setting.
rule all:
    input:
        seed_targets(config["seed"]),


# `make science`'s first step (scripts/science_inits.py): the init(s) science.seeds start from, none when
# science.init_from names another run's, so the inits of a report's runs can be built side by side.
rule science_init:
    input:
        [] if config["science"].get("init_from") else sorted({init_dir(s) for s in config["science"]["seeds"]}),


# `make science`: the claims over science.seeds, each seed a replicate run side by side under a profile.
rule science_all:
    input:
        expand("results/science/{benchmark}/{setting}/science.md", benchmark=BENCHMARKS, setting=SETTINGS),
        "results/science/training/training.png",  # the training curves over the seeds
