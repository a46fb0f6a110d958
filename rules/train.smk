# One GRPO checkpoint per coverage regime; regimes differ only in the reward's test tier.


rule train:
    input:
        init="results/init",
        problems="results/data/_train/problems.jsonl",
        calibration="results/calibration.json",
    output:
        directory("results/checkpoints/{regime}"),
    params:
        gpus=gpus,
        settings=as_json({**config["grpo"], "seed": config["seed"]}),
        regime=regime_spec,
        backend=sandbox_backend(),
    threads: 2
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
        "--sandbox-backend {params.backend} --calibration {input.calibration} --out {output} 2> {log}"
