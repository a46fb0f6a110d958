"""The analysis stage (rules/analysis.smk): the frontier over the alpha grid, matched-budget ensembles,
the study's claims with bootstrap CIs, what each alpha writes, and the claims over several seeds."""
