# The shared initial model every regime starts from (tiny: tokenizer + Qwen2 + SFT warm start).


rule init:
    input:
        problems="results/data/_train/problems.jsonl",
    output:
        directory("results/init"),
    params:
        settings=as_json({**config["model"], "seed": config["seed"]}),
        init=config["model"]["init"],
    threads: 2  # init runs alone; SFT on 2 threads took 0.55x the wall of 1 (batch 8, up to 1k tokens)
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
