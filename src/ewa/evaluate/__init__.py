"""The evaluation stage (rules/evaluate.smk): calibrate this machine's time limits, then judge every
sample in the sandbox and write one verdict row per sample."""
