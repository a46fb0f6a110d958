# ewa: Extrapolative Weight Averaging — correctness-efficiency frontiers in code RL.
# Wiring only: the logic lives in the `ewa` package (src/ewa), each stage one rules/*.smk file.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/init.smk"
include: "rules/train.smk"
include: "rules/merge.smk"
include: "rules/sample.smk"
include: "rules/evaluate.smk"
include: "rules/frontier.smk"


rule all:
    input:
        frontier_targets(),
