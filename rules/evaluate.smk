# Judge every sample on the hidden suite, in size order: a verdict per sample, first failing test and
# tier. Time limits are scaled by this machine's calibration (measured once, on the kind of node that judges).


rule calibrate:
    input:
        preflight=preflight_record("calibrate"),
    output:
        "results/calibration.json",
    params:
        config=sandbox_config,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/calibrate.log",
    shell:
        "ewa calibrate --config {params.config:q} --out {output} 2> {log}"


rule evaluate:
    input:
        samples="results/seed{seed}/samples/alpha{tag}/{benchmark}/{setting}.jsonl",
        problems="results/seed{seed}/data/{benchmark}/problems.jsonl",
        tiers="results/seed{seed}/data/{benchmark}/tiers.json",
        calibration=calibration_input,
    output:
        "results/seed{seed}/evals/alpha{tag}/{benchmark}/{setting}.parquet",
    params:
        config=evaluate_config,
        calibration=calibration_flag,
    threads: 2
    # As soon as its samples exist, like sample: judging in the gaps keeps the end of a run short
    # instead of leaving every evaluation to run in a row after the last sample job.
    priority: 1
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/seed{seed}/evaluate/alpha{tag}/{benchmark}/{setting}.log",
    benchmark:
        "results/seed{seed}/benchmarks/evaluate/alpha{tag}/{benchmark}/{setting}.tsv"
    shell:
        "ewa evaluate --config {params.config:q} --problems {input.problems} --samples {input.samples} "
        "--tiers {input.tiers} {params.calibration} --workers {threads} --out {output} 2> {log}"
