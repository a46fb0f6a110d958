# Before hours of queueing: `ewa preflight` on a node of every partition the run's first jobs use (the
# sandbox end to end, the judge's interpreter, the GPU stack, free disk against `ewa plan`). Each first
# job (prepare, calibrate and init: nothing upstream but data; train: the first GPU job) waits for the
# preflight of its own partition, read from the profile's slurm_partition (`local` without one).
PREFLIGHT_RULES = ("prepare", "calibrate", "init", "train")


def profile_resource(name, key):
    """What the profile gives rule `name` for `key` (set-resources, else default-resources), as written; None if unset."""
    settings = workflow.resource_settings
    for given in (settings.overwrite_resources.get(name) or {}, settings.default_resources or {}):
        if key in given:
            return given[key].raw
    return None


def partition_of(name):
    return profile_resource(name, "slurm_partition") or "local"


PARTITIONS = sorted({partition_of(r) for r in PREFLIGHT_RULES})


def preflight_record(name):
    """The input of a first job (rule `name`): the preflight record of the partition it runs on."""
    return f"results/preflight/{partition_of(name)}.json"


def gpu_rule(partition):
    """A first job on `partition` that asks for GPUs (its request, one GPU, is the preflight's), or None."""
    asking = [r for r in PREFLIGHT_RULES if partition_of(r) == partition
              and (profile_resource(r, "gpu") or "gpu" in str(profile_resource(r, "gres") or ""))]
    return asking[0] if asking else None


def preflight_partition(wildcards):
    return None if wildcards.partition == "local" else wildcards.partition


def preflight_gpu(wildcards):
    asker = gpu_rule(wildcards.partition)
    return 1 if asker and profile_resource(asker, "gpu") else None


def preflight_gpu_model(wildcards):
    asker = gpu_rule(wildcards.partition)
    return profile_resource(asker, "gpu_model") if asker and profile_resource(asker, "gpu") else None


def preflight_gres(wildcards):
    asker = gpu_rule(wildcards.partition)
    gres = profile_resource(asker, "gres") if asker else None
    return re.sub(r"(gpu(?::[\w.]+)?:)\d+", r"\g<1>1", str(gres)) if gres else None


def preflight_config(wildcards):
    """What the preflight opens: the sandbox, and on a GPU partition the accelerate config (whose offload
    needs DeepSpeed's CPU Adam). Both rerun that partition's jobs anyway when they change."""
    sandbox = {k: config["sandbox"][k] for k in ("backend", "python", "docker_image")}
    grpo = {"grpo": {"accelerate_config": config["grpo"]["accelerate_config"]}} if gpu_rule(wildcards.partition) else {}
    return job_config(wildcards, sandbox=sandbox, **grpo)


def run_configfile(wildcards):
    """The experiment's file, read as `ewa plan` reads it (disk peak, datasets' Python, vLLM): a path, not
    its content, so adding an alpha or a benchmark does not rerun the preflight and all after it."""
    path = Path(workflow.configfiles[-1]).absolute() if workflow.configfiles else Path("config.yaml").absolute()
    return os.path.relpath(path) if path.is_relative_to(Path.cwd()) else str(path)


wildcard_constraints:
    partition="|".join(map(re.escape, PARTITIONS)),


rule preflight:
    output:
        "results/preflight/{partition}.json",
    params:
        config=preflight_config,
        configfile=run_configfile,
        gpus=gpus,
    # On the partition it checks, asking for one of the GPUs its GPU jobs ask for.
    resources:
        slurm_partition=preflight_partition,
        gpu=preflight_gpu,
        gpu_model=preflight_gpu_model,
        gres=preflight_gres,
        mem_mb=8000,  # the plan imports transformers; vLLM and DeepSpeed import in child processes
        runtime=30,
    conda:
        "../envs/ewa.yaml"
    log:
        "logs/preflight/{partition}.log",
    shell:
        "ewa preflight --config {params.config:q} --configfile {params.configfile:q} --gpus {params.gpus} "
        "--out {output} 2> {log}"
