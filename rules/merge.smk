# theta(a) = (1-a)*theta_low + a*theta_high on the alpha grid (a<0 and a>1 extrapolate).
# One job per alpha, so adding an alpha builds only that alpha.


rule merge:
    input:
        low=f"results/checkpoints/{config['merge']['low']}",
        high=f"results/checkpoints/{config['merge']['high']}",
    output:
        temp(directory("results/merged/alpha{tag}")) if config["merge"]["temp"] else directory("results/merged/alpha{tag}"),
    params:
        alpha=alpha_of,
        device=config["merge"]["device"],
        shard=config["merge"]["max_shard_size"],
    resources:
        mem_mb=4000,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/merge/alpha{tag}.log",
    benchmark:
        "results/benchmarks/merge/alpha{tag}.tsv"
    shell:
        "ewa merge {input.low} {input.high} --alpha {params.alpha} --device {params.device} "
        "--max-shard-size {params.shard} --out {output} 2> {log}"
