# The shared initial model every regime starts from (tiny: tokenizer + Qwen2 + SFT warm start).


rule init:
    input:
        problems="results/data/_train/problems.jsonl",
    output:
        directory("results/init"),
    params:
        settings=as_json({**config["model"], "seed": config["seed"]}),
        init=config["model"]["init"],
    threads: 1  # see rules/train.smk: tiny models train faster on one thread
    resources:
        mem_mb=4000,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/init.log",
    benchmark:
        "results/benchmarks/init.tsv"
    shell:
        "ewa init --init {params.init:q} --settings {params.settings:q} "
        "--problems {input.problems} --threads {threads} --out {output} 2> {log}"
