# Aggregate the alpha grid: the frontier (with Pareto set, solve matrix, matched-budget ensembles and
# plots), the study's claims with CIs, what each alpha writes, and the claims over the science seeds.
# Each step writes a directory it owns alone, and declares every file in it.

FRONTIER_DIR = "results/seed{seed}/frontier/{benchmark}/{setting}"
PLOT_CAPTIONS = {"frontier": "Frontier", "pass_at_k": "pass@k", "ensembles": "Ensembles", "overlaps": "Complementarity"}


rule frontier:
    input:
        evals=frontier_evals,
        problems="results/seed{seed}/data/{benchmark}/problems.jsonl",
    output:
        *[f"{FRONTIER_DIR}/{name}" for name in frontier_files() if not name.endswith(".png") and name != "behaviour.csv"],
        report(f"{FRONTIER_DIR}/behaviour.csv", caption="../report/behaviour.rst", category="Behaviour",
               subcategory="seed {seed}: {benchmark} / {setting}"),
        *[report(f"{FRONTIER_DIR}/{plot}.png", caption=f"../report/{plot}.rst", category=category,
                 subcategory="seed {seed}: {benchmark} / {setting}")
          for plot, category in PLOT_CAPTIONS.items()],
    params:
        config=analysis_config,
        evals=frontier_eval_args,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/seed{seed}/frontier/{benchmark}/{setting}.log",
    shell:
        "ewa frontier --config {params.config:q} --evals {params.evals} --problems {input.problems} "
        "--out-dir results/seed{wildcards.seed}/frontier/{wildcards.benchmark}/{wildcards.setting} 2> {log}"


# The merge families compared (merge.families, ewa.analysis.families): every family's points on the frontier,
# each family's front and its hypervolume, the differences between families with cluster-bootstrap CIs, and
# matched-budget ensembles drawing from any family.
rule families:
    input:
        evals=family_evals,
        problems="results/seed{seed}/data/{benchmark}/problems.jsonl",
    output:
        *[f"results/seed{{seed}}/families/{{benchmark}}/{{setting}}/{name}" for name in families_files()
          if name != "families.png"],
        report("results/seed{seed}/families/{benchmark}/{setting}/families.png", caption="../report/families.rst",
               category="Families", subcategory="seed {seed}: {benchmark} / {setting}"),
    params:
        config=analysis_config,
        spec=families_spec,
        evals=family_eval_args,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/seed{seed}/families/{benchmark}/{setting}.log",
    shell:
        "ewa families --config {params.config:q} --families {params.spec:q} --evals {params.evals} "
        "--problems {input.problems} --out-dir results/seed{wildcards.seed}/families/{wildcards.benchmark}/"
        "{wildcards.setting} > {log} 2>&1"


# The study's four claims on this run, each with a paired bootstrap CI over problems. The endpoints' train
# records say whether they differ at all: where they are the same weights every claim reads untestable.
rule claims:
    input:
        evals=frontier_evals,
        ensembles=f"{FRONTIER_DIR}/ensembles.csv",
        endpoints=lambda w: [source_dir(w.seed, config["merge"][end]) for end in ("low", "high")],
    output:
        *[f"results/seed{{seed}}/claims/{{benchmark}}/{{setting}}/{name}" for name in CLAIMS_FILES if name != "claims.html"],
        report("results/seed{seed}/claims/{benchmark}/{setting}/claims.html", caption="../report/claims.rst",
               category="Claims", subcategory="seed {seed}: {benchmark} / {setting}"),
    params:
        config=analysis_config,
        evals=frontier_eval_args,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/seed{seed}/claims/{benchmark}/{setting}.log",
    shell:
        "ewa claims --config {params.config:q} --evals {params.evals} --ensembles {input.ensembles} "
        "--endpoints {input.endpoints} "
        "--out-dir results/seed{wildcards.seed}/claims/{wildcards.benchmark}/{wildcards.setting} > {log} 2>&1"


# What each alpha writes (brute force or efficient algorithm, read from how each program's CPU time grows
# over the size-ordered tests; the plan line as ground truth where there is one) and how each kind fails.
rule approaches:
    input:
        evals=frontier_evals,
        samples=frontier_samples,
        problems="results/seed{seed}/data/{benchmark}/problems.jsonl",
    output:
        report("results/seed{seed}/approaches/{benchmark}/{setting}/approaches.csv", caption="../report/approaches.rst",
               category="Claims", subcategory="seed {seed}: {benchmark} / {setting}"),
        "results/seed{seed}/approaches/{benchmark}/{setting}/declared.csv",
        "results/seed{seed}/approaches/{benchmark}/{setting}/premise.csv",
        "results/seed{seed}/approaches/{benchmark}/{setting}/agreement.csv",
        "results/seed{seed}/approaches/{benchmark}/{setting}/classified.parquet",
        "results/seed{seed}/approaches/{benchmark}/{setting}/provenance.json",
    params:
        evals=frontier_eval_args,
        samples=frontier_sample_args,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/seed{seed}/approaches/{benchmark}/{setting}.log",
    shell:
        "ewa approaches --evals {params.evals} --samples {params.samples} --problems {input.problems} "
        "--out-dir results/seed{wildcards.seed}/approaches/{wildcards.benchmark}/{wildcards.setting} > {log} 2>&1"


def science_rule_config(wildcards):
    """science_config with sample.n: the withdrawal rule (science.withdraw_if) checks every evaluation
    judged sample.n samples of every problem."""
    return as_json({**json.loads(science_config(wildcards)), "sample": {"n": config["sample"]["n"]}})


# Every partition's preflight record: the withdrawal rule reads each one's containment probe.
RUN_PREFLIGHTS = sorted({preflight_record(r) for r in PREFLIGHT_RULES})


# The claims over the science seeds (`make science`): every seed is its own replicate in the DAG, and each
# must be registered for this report in the registry, its outputs made at the registered commit and config.
# Before any claim is rendered every seed is checked against the withdrawal rule (science.withdraw_if).
rule science:
    input:
        claims=science_seed_dirs("claims"),
        approaches=science_seed_dirs("approaches"),
        premise=science_seed_dirs("approaches", "premise.csv"),
        frontier_plot=f"results/seed{config['science']['seeds'][0]}/frontier/{{benchmark}}/{{setting}}/frontier.png",
        preflight=RUN_PREFLIGHTS,
    output:
        *[f"results/science/{{benchmark}}/{{setting}}/{name}" for name in SCIENCE_FILES if name != "seeds.png"],
        report("results/science/{benchmark}/{setting}/seeds.png", caption="../report/science.rst",
               category="Claims", subcategory="seeds: {benchmark} / {setting}"),
    params:
        config=science_rule_config,
        claims=parent_dirs("claims"),
        approaches=parent_dirs("approaches"),
        registry=REGISTRY,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/science/{benchmark}/{setting}.log",
    shell:
        "ewa science --config {params.config:q} --claims {params.claims} --approaches {params.approaches} "
        "--frontier-plot {input.frontier_plot} --benchmark {wildcards.benchmark} --setting {wildcards.setting} "
        "--preflight {input.preflight} --registry {params.registry:q} --out-dir results/science/{wildcards.benchmark}/{wildcards.setting} > {log} 2>&1"


# The report's front page (its workflow description): the study, this run's config, its claims.
rule front_page:
    input:
        claims=front_claims,
    output:
        "results/seed{seed}/report/front.rst",
    params:
        config=front_config,
        claims=front_claims_args,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/seed{seed}/front_page.log",
    shell:
        "ewa front --config {params.config:q} --claims {params.claims} --out {output} > {log} 2>&1"


# Training as it happened (ewa.analysis.training): per regime, the GRPO steps of its checkpoint's metrics.csv
# (reward, groups without spread, the rollouts' verdict mix, KL, completion length), and the init's warm-start
# loss (sft_metrics.csv in the init) when the config has one; training.csv is what the seeds' figure reads.
WARM_START = config["model"]["sft"]["steps"] > 0
# Only the regimes the run trains anyway: the merge's endpoints and the sources of merge.families' points (a
# paper config lists four regimes and trains two); the figures never make a GRPO run of their own.
TRAINED = {config["merge"]["low"], config["merge"]["high"], *(s for p in POINTS.values() for s in p.sources)}
TRAINED_REGIMES = [r for r in REGIMES if r in TRAINED]


def training_config(wildcards):
    return job_config(wildcards)


def training_checkpoint_args(wildcards, input):
    """`REGIME=DIR` per trained regime (TRAINED_REGIMES and the checkpoints are in the same order)."""
    return " ".join(f"{r}={d}" for r, d in zip(TRAINED_REGIMES, input.checkpoints, strict=True))


def training_init_arg(wildcards, input):
    return f"--init {input.init}" if WARM_START else ""


def science_training_args(wildcards, input):
    """`SEED=PATH` per science seed's training.csv."""
    return " ".join(f"{s}={p}" for s, p in zip(config["science"]["seeds"], input, strict=True))


rule training:
    input:
        checkpoints=expand("results/seed{{seed}}/checkpoints/{regime}", regime=TRAINED_REGIMES),
        init=train_init,
    output:
        table="results/seed{seed}/training/training.csv",
        figures=[report(f"results/seed{{seed}}/training/{regime}.png", caption="../report/training.rst",
                        category="Training", subcategory="seed {seed}") for regime in TRAINED_REGIMES],
        sft=[report("results/seed{seed}/training/sft.png", caption="../report/training_sft.rst", category="Training",
                    subcategory="seed {seed}")] if WARM_START else [],
    params:
        config=training_config,
        checkpoints=training_checkpoint_args,
        init=training_init_arg,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/seed{seed}/training.log",
    shell:
        "ewa training --config {params.config:q} --checkpoints {params.checkpoints} {params.init} "
        "--out-dir results/seed{wildcards.seed}/training > {log} 2>&1"


# The same curves over the science seeds: median and the band from the lowest to the highest seed.
rule science_training:
    input:
        expand("results/seed{seed}/training/training.csv", seed=config["science"]["seeds"]),
    output:
        report("results/science/training/training.png", caption="../report/science_training.rst", category="Training",
               subcategory="seeds"),
        "results/science/training/training.csv",
    params:
        tables=science_training_args,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/science/training.log",
    shell:
        "ewa training --tables {params.tables} --out-dir results/science/training > {log} 2>&1"
