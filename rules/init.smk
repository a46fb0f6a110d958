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
