# Problems in the canonical format, and their nested coverage tiers. Dataset `_train` is the config's
# train_data; any other is a benchmark.


# A dataset with verify_solutions (train_data by default, for a format that ships solutions) runs them in the
# sandbox, time limits calibrated as for the reward, on {threads} workers.
rule prepare:
    input:
        preflight=preflight_record("prepare"),
        calibration=prepare_calibration,
    output:
        problems="results/seed{seed}/data/{dataset}/problems.jsonl",
        meta="results/seed{seed}/data/{dataset}/problems.jsonl.meta.json",
    params:
        config=data_config,
        dataset=dataset_name,
        calibration=calibration_flag,
    threads: prepare_threads
    # Defaults for the miniature; profiles/slurm sets its own. Memory does not grow with the number of
    # problems (they stream through): the loader's ~100 MB, plus the sandbox workers when verifying.
    resources:
        mem_mb=prepare_mem_mb,
        runtime=60,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/seed{seed}/data/{dataset}.log",
    shell:
        "ewa prepare --config {params.config:q} --dataset {params.dataset} {params.calibration} "
        "--workers {threads} --out {output.problems} 2> {log}"


rule tiers:
    input:
        "results/seed{seed}/data/{dataset}/problems.jsonl",
    output:
        "results/seed{seed}/data/{dataset}/tiers.json",
    params:
        config=tiers_config,
    resources:
        mem_mb=1000,  # one problem at a time
        runtime=30,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/seed{seed}/data/{dataset}.tiers.log",
    shell:
        "ewa tiers --config {params.config:q} --problems {input} --out {output} 2> {log}"
