# One GRPO checkpoint per coverage regime; regimes differ only in the reward's test tier.


rule train:
    input:
        preflight=preflight_record("train"),
        init=train_init,  # the seed's own init, or the experiment's one (science.init_seed)
        problems="results/seed{seed}/data/_train/problems.jsonl",
        calibration=calibration_input,
    output:
        directory("results/seed{seed}/checkpoints/{regime}"),
    params:
        config=train_config,
        calibration=calibration_flag,
        gpus=gpus,
    # One torch thread per job: tiny models lose more to thread sync than they gain, and two
    # jobs then run side by side on the miniature's two cores. Profiles raise it for big models.
    threads: 1
    resources:
        mem_mb=6000,
        cuda_alloc_conf="${PYTORCH_CUDA_ALLOC_CONF:-}",  # as inherited; profiles set it for GPU jobs
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/seed{seed}/train/{regime}.log",
    benchmark:
        "results/seed{seed}/benchmarks/train/{regime}.tsv"
    shell:
        "PYTORCH_CUDA_ALLOC_CONF=\"{resources.cuda_alloc_conf}\" "
        "ewa train --config {params.config:q} --regime {wildcards.regime} --init {input.init} "
        "--problems {input.problems} {params.calibration} --gpus {params.gpus} --threads {threads} "
        "--out {output} 2> {log}"
