# One GRPO checkpoint per coverage regime; regimes differ only in the reward's test tier.


rule train:
    input:
        init="results/init",
        problems="results/data/_train/problems.jsonl",
        calibration=calibration_input,
    output:
        directory("results/checkpoints/{regime}"),
    params:
        gpus=gpus,
        settings=as_json(config["grpo"]),
        regime=regime_spec,
        sandbox=sandbox_settings,
        seed=config["seed"],
    # One torch thread per job: tiny models lose more to thread sync than they gain, and two
    # jobs then run side by side on the miniature's two cores. Profiles raise it for big models.
    threads: 1
    resources:
        mem_mb=6000,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/train/{regime}.log",
    benchmark:
        "results/benchmarks/train/{regime}.tsv"
    shell:
        "ewa train --gpus {params.gpus} --init {input.init} --problems {input.problems} --regime {wildcards.regime} "
        "--regimes-json {params.regime:q} --settings {params.settings:q} "
        "--sandbox-settings {params.sandbox:q} --seed {params.seed} --threads {threads} --out {output} 2> {log}"
