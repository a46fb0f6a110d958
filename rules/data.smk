# Problems in the canonical format, and their nested coverage tiers.


rule prepare_train_data:
    output:
        "results/data/_train/problems.jsonl",
    params:
        spec=dataset_params,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/data/_train.log",
    shell:
        "ewa prepare --spec {params.spec:q} --out {output} 2> {log}"


rule prepare_benchmark:
    output:
        "results/data/{benchmark}/problems.jsonl",
    params:
        spec=dataset_params,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/data/{benchmark}.log",
    shell:
        "ewa prepare --spec {params.spec:q} --out {output} 2> {log}"


rule tiers:
    input:
        "results/data/{dataset}/problems.jsonl",
    output:
        "results/data/{dataset}/tiers.json",
    params:
        regimes=as_json(config["regimes"]),
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/data/{dataset}.tiers.log",
    shell:
        "ewa tiers --problems {input} --regimes {params.regimes:q} --out {output} 2> {log}"


rule calibrate:
    output:
        "results/calibration.json",
    params:
        backend=config["sandbox"]["backend"],
        python=config["sandbox"]["python"],
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/calibrate.log",
    shell:
        "ewa calibrate --backend {params.backend} --python {params.python} --out {output} 2> {log}"
