# theta(a) = (1-a)*theta_low + a*theta_high on the alpha grid (a<0 and a>1 extrapolate).
# One job per alpha by default, so adding an alpha builds only that alpha. A profile that sets
# `alphas_per_job: N` for merge (profiles/slurm) gets one job per N alphas of the sorted grid instead
# (merge_chunks in common.smk), each reading both checkpoints once for all of its alphas: at 32B, 3 x 131 GB
# read for the 17-point grid in chunks of 6 rather than 17 x 131 GB. Either way each alpha is its own output,
# and with merge.temp (the default) each merged model is deleted once every sample job of its alpha is done
# (merged_output in common.smk).

if not MERGE_CHUNKS:

    rule merge:
        input:
            low=f"results/seed{{seed}}/checkpoints/{config['merge']['low']}",
            high=f"results/seed{{seed}}/checkpoints/{config['merge']['high']}",
        output:
            merged_output("results/seed{seed}/merged/alpha{tag}"),
        wildcard_constraints:
            tag=ALPHA_TAG_PATTERN,
        params:
            config=merge_config,
            alpha=alpha_of,
        resources:
            mem_mb=4000,
            cuda_alloc_conf="${PYTORCH_CUDA_ALLOC_CONF:-}",  # as inherited; profiles set it for GPU jobs
        conda:
            "../envs/ewa.yaml"
        log:
            "logs/seed{seed}/merge/alpha{tag}.log",
        benchmark:
            "results/seed{seed}/benchmarks/merge/alpha{tag}.tsv"
        shell:
            "PYTORCH_CUDA_ALLOC_CONF=\"{resources.cuda_alloc_conf}\" "
            "ewa merge --config {params.config:q} {input.low} {input.high} --alpha {params.alpha} --out {output} 2> {log}"

# The chunk rules take the profile's resources and threads for merge (share_merge_settings in common.smk).
for number, tags in enumerate(MERGE_CHUNKS, 1):

    rule:
        name:
            f"merge_chunk{number}"
        input:
            low=f"results/seed{{seed}}/checkpoints/{config['merge']['low']}",
            high=f"results/seed{{seed}}/checkpoints/{config['merge']['high']}",
        output:
            [merged_output(f"results/seed{{seed}}/merged/alpha{tag}") for tag in tags],
        params:
            config=merge_config,
            alphas=chunk_alphas,
            pattern=chunk_out_pattern,
        resources:
            mem_mb=4000,
            cuda_alloc_conf="${PYTORCH_CUDA_ALLOC_CONF:-}",
        conda:
            "../envs/ewa.yaml"
        log:
            f"logs/seed{{seed}}/merge/alpha{tags[0]}..{tags[-1]}.log",
        benchmark:
            f"results/seed{{seed}}/benchmarks/merge/alpha{tags[0]}..{tags[-1]}.tsv"
        shell:
            "PYTORCH_CUDA_ALLOC_CONF=\"{resources.cuda_alloc_conf}\" "
            "ewa merge --config {params.config:q} {input.low} {input.high} --alphas {params.alphas} "
            "--out-pattern {params.pattern:q} 2> {log}"


# A point of merge.families off the alpha line (ewa.families): sum_i w_i * theta_i over the init and the regimes'
# checkpoints, weights summing to 1, one job per point; a point two families share is one target, built once.
rule merge_point:
    input:
        point_sources,
    output:
        merged_output("results/seed{seed}/merged/alpha{tag}"),
    wildcard_constraints:
        tag=POINT_TAG_PATTERN,
    params:
        config=merge_config,
        sources=point_source_args,
    resources:
        mem_mb=4000,
        cuda_alloc_conf="${PYTORCH_CUDA_ALLOC_CONF:-}",
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/seed{seed}/merge/alpha{tag}.log",
    benchmark:
        "results/seed{seed}/benchmarks/merge/alpha{tag}.tsv"
    shell:
        "PYTORCH_CUDA_ALLOC_CONF=\"{resources.cuda_alloc_conf}\" "
        "ewa merge-point --config {params.config:q} {params.sources} --out {output} 2> {log}"
