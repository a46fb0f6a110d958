# Judge every sample on the hidden suite, in size order: a verdict per sample, first failing test and tier.


rule evaluate:
    input:
        samples="results/samples/alpha{tag}/{benchmark}/{setting}.jsonl",
        problems="results/data/{benchmark}/problems.jsonl",
        tiers="results/data/{benchmark}/tiers.json",
        calibration=calibration_input,
    output:
        "results/evals/alpha{tag}/{benchmark}/{setting}.parquet",
    params:
        sandbox=sandbox_flags,
        early_stop="--early-stop" if config["evaluate"]["early_stop"] else "",
        duplicates="--judge-duplicates" if config["evaluate"]["judge_duplicates"] else "",
    threads: 2
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/evaluate/alpha{tag}/{benchmark}/{setting}.log",
    benchmark:
        "results/benchmarks/evaluate/alpha{tag}/{benchmark}/{setting}.tsv"
    shell:
        "ewa evaluate --problems {input.problems} --samples {input.samples} --tiers {input.tiers} "
        "{params.sandbox} {params.early_stop} {params.duplicates} --workers {threads} "
        "--out {output} 2> {log}"
