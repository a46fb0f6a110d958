# The shared initial model every regime starts from (tiny: tokenizer + Qwen2 + SFT warm start; a model
# directory: linked as it is, unless model.sft turns its warm start on).


rule init:
    input:
        preflight=preflight_record("init"),
        problems="results/seed{seed}/data/_train/problems.jsonl",
    output:
        directory("results/seed{seed}/init"),
    params:
        config=init_config,
    threads: 2  # init runs alone, and SFT's batches keep both threads busy
    resources:
        mem_mb=4000,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/seed{seed}/init.log",
    benchmark:
        "results/seed{seed}/benchmarks/init.tsv"
    shell:
        "ewa init --config {params.config:q} --problems {input.problems} --threads {threads} --out {output} 2> {log}"


# science.init_seed: the experiment's one init, built once from that seed's train problems, which every seed's
# GRPO runs and merges start from (init_dir in common.smk), as in the paper. Rule init's job, in a directory of
# its own: results/init/seed<init_seed>/ holds the model, its train problems and its benchmark.
use rule prepare as shared_init_prepare with:
    output:
        problems="results/init/seed{seed}/data/{dataset}/problems.jsonl",
        meta="results/init/seed{seed}/data/{dataset}/problems.jsonl.meta.json",
    log:
        "logs/init/seed{seed}/data/{dataset}.log",


use rule init as shared_init with:
    input:
        preflight=preflight_record("init"),
        problems="results/init/seed{seed}/data/_train/problems.jsonl",
    output:
        directory("results/init/seed{seed}/model"),
    log:
        "logs/init/seed{seed}/init.log",
    benchmark:
        "results/init/seed{seed}/benchmarks/init.tsv"
