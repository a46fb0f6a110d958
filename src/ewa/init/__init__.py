"""The init stage (rules/init.smk): the shared initial model every coverage regime's RL run starts from."""

# The init's provenance record, beside its weights; named here, away from torch, so the workflow and the
# trainer read it without importing ewa.init.build.
PROVENANCE_FILE = "ewa_init.json"
SFT_HISTORY_FILE = "sft_metrics.csv"  # the warm start's loss curve, beside its weights, for the training figures
