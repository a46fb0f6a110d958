# Aggregate the alpha grid: frontier table, Pareto set, solve matrix, matched-budget ensembles, plots.


rule frontier:
    input:
        evals=frontier_evals,
        problems="results/data/{benchmark}/problems.jsonl",
    output:
        table="results/frontier/{benchmark}/{setting}/frontier.csv",
        ensembles="results/frontier/{benchmark}/{setting}/ensembles.csv",
        frontier_plot=report(
            "results/frontier/{benchmark}/{setting}/frontier.png",
            caption="../report/frontier.rst",
            category="Frontier",
            subcategory="{benchmark} / {setting}",
        ),
        pass_at_k_plot=report(
            "results/frontier/{benchmark}/{setting}/pass_at_k.png",
            caption="../report/pass_at_k.rst",
            category="pass@k",
            subcategory="{benchmark} / {setting}",
        ),
        ensemble_plot=report(
            "results/frontier/{benchmark}/{setting}/ensembles.png",
            caption="../report/ensembles.rst",
            category="Ensembles",
            subcategory="{benchmark} / {setting}",
        ),
        overlaps_plot=report(
            "results/frontier/{benchmark}/{setting}/overlaps.png",
            caption="../report/overlaps.rst",
            category="Complementarity",
            subcategory="{benchmark} / {setting}",
        ),
    params:
        evals=frontier_eval_args,
        k=" ".join(map(str, config["evaluate"]["k"])),
        budget=config["evaluate"]["budget"],
        bootstrap=config["evaluate"]["bootstrap"],
        seed=config["seed"],
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/frontier/{benchmark}/{setting}.log",
    shell:
        "ewa frontier --evals {params.evals} --problems {input.problems} --k {params.k} "
        "--budget {params.budget} --bootstrap {params.bootstrap} --seed {params.seed} "
        "--out-dir results/frontier/{wildcards.benchmark}/{wildcards.setting} 2> {log}"


# The study's four claims on this run, each with a paired bootstrap CI over problems.
rule claims:
    input:
        evals=frontier_evals,
        ensembles="results/frontier/{benchmark}/{setting}/ensembles.csv",
    output:
        table="results/frontier/{benchmark}/{setting}/claims.csv",
        per_alpha="results/frontier/{benchmark}/{setting}/per_alpha.csv",
        html=report(
            "results/frontier/{benchmark}/{setting}/claims.html",
            caption="../report/claims.rst",
            category="Claims",
            subcategory="{benchmark} / {setting}",
        ),
    params:
        evals=frontier_eval_args,
        bootstrap=config["evaluate"]["bootstrap"],
        seed=config["seed"],
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/claims/{benchmark}/{setting}.log",
    shell:
        "ewa claims --evals {params.evals} --ensembles {input.ensembles} --bootstrap {params.bootstrap} "
        "--seed {params.seed} --out {output.table} > {log} 2>&1"


# What each alpha writes (the plan line's brute force / efficient algorithm) and how each kind fails.
rule approaches:
    input:
        evals=frontier_evals,
        samples=frontier_samples,
    output:
        # not inside results/frontier/{benchmark}/{setting}/: the frontier rule replaces that directory whole
        report(
            "results/approaches/{benchmark}/{setting}.csv",
            caption="../report/approaches.rst",
            category="Claims",
            subcategory="{benchmark} / {setting}",
        ),
    params:
        evals=frontier_eval_args,
        samples=frontier_sample_args,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/approaches/{benchmark}/{setting}.log",
    shell:
        "ewa approaches --evals {params.evals} --samples {params.samples} --out {output} > {log} 2>&1"
