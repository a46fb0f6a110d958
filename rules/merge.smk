# theta(a) = (1-a)*theta_low + a*theta_high on the alpha grid (a<0 and a>1 extrapolate).
# One job per alpha, so adding an alpha builds only that alpha. With merge.temp (the default) the merged
# model is deleted once every sample job of its alpha is done (merged_output in common.smk).


rule merge:
    input:
        low=f"results/seed{{seed}}/checkpoints/{config['merge']['low']}",
        high=f"results/seed{{seed}}/checkpoints/{config['merge']['high']}",
    output:
        merged_output("results/seed{seed}/merged/alpha{tag}"),
    params:
        config=merge_config,
        alpha=alpha_of,
    resources:
        mem_mb=4000,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/seed{seed}/merge/alpha{tag}.log",
    benchmark:
        "results/seed{seed}/benchmarks/merge/alpha{tag}.tsv"
    shell:
        "ewa merge --config {params.config:q} {input.low} {input.high} --alpha {params.alpha} --out {output} 2> {log}"
