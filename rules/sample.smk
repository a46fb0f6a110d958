# Sample every merged model per benchmark and inference setting; model code runs in the sandbox.


rule sample:
    input:
        model=merged_model,
        problems="results/seed{seed}/data/{benchmark}/problems.jsonl",
        calibration=calibration_input,
    output:
        samples="results/seed{seed}/samples/alpha{tag}/{benchmark}/{setting}.jsonl",
        provenance="results/seed{seed}/samples/alpha{tag}/{benchmark}/{setting}.provenance.json",
    params:
        config=sample_config,
        calibration=calibration_flag,
        max_k=max_k(),
    # One torch thread per job: tiny models lose more to thread sync than they gain, and two
    # jobs then run side by side on the miniature's two cores. Profiles raise it for big models.
    threads: 1
    # Ahead of merges: a free slot samples an alpha already merged (whose model is deleted once its last
    # sample job is done, merge.temp) before it merges another, so fewer merged models wait on disk.
    priority: 1
    resources:
        mem_mb=4000,
        cuda_alloc_conf="${PYTORCH_CUDA_ALLOC_CONF:-}",  # as inherited; profiles set it for GPU jobs
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/seed{seed}/sample/alpha{tag}/{benchmark}/{setting}.log",
    benchmark:
        "results/seed{seed}/benchmarks/sample/alpha{tag}/{benchmark}/{setting}.tsv"
    shell:
        "PYTORCH_CUDA_ALLOC_CONF=\"{resources.cuda_alloc_conf}\" "
        "ewa sample --config {params.config:q} --model {input.model} --problems {input.problems} "
        "--setting {wildcards.setting} --stream alpha{wildcards.tag} --max-k {params.max_k} {params.calibration} "
        "--workers {threads} --threads {threads} --out {output.samples} 2> {log}"
