# Sample every merged model per benchmark and inference setting; model code runs in the sandbox.


rule sample:
    input:
        model=merged_model,
        problems="results/data/{benchmark}/problems.jsonl",
        calibration=calibration_input,
    output:
        "results/samples/alpha{tag}/{benchmark}/{setting}.jsonl",
    params:
        settings=as_json({**config["sample"], "seed": config["seed"]}),
        sandbox=sandbox_flags,
        max_k=max(config["evaluate"]["k"] + [config["evaluate"]["budget"]]),
    # One torch thread per job: tiny models lose more to thread sync than they gain, and two
    # jobs then run side by side on the miniature's two cores. Profiles raise it for big models.
    threads: 1
    resources:
        mem_mb=4000,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/sample/alpha{tag}/{benchmark}/{setting}.log",
    benchmark:
        "results/benchmarks/sample/alpha{tag}/{benchmark}/{setting}.tsv"
    shell:
        "ewa sample --model {input.model} --problems {input.problems} --setting {wildcards.setting} "
        "--settings {params.settings:q} --max-k {params.max_k} {params.sandbox} "
        "--workers {threads} --threads {threads} --out {output} 2> {log}"
