"""`ewa plan`: what a config costs on a profile's machines, by arithmetic and before a job is queued.

Per rule: GPUs, peak memory per GPU (weights, gradients and optimizer state as the accelerate config
shards them, activations, the log-prob head, a colocated vLLM's share), wall-hours from a stated
throughput model, disk, and sandbox work. Nothing runs on a GPU and nothing is written but stdout.

- model.py: the model's architecture and exact parameter count (config.json on the meta device)
- profile.py: what a Snakemake profile gives each rule (GPUs, GPU memory, runtime, retries)
- memory.py: bytes per device (ZeRO/FSDP sharding, activations, vLLM)
- speed.py: the throughput model and its constants, each with its source
- workload.py: problems, tokens and program runs per job
- estimate.py: the plan of every rule and the disk it needs; cli.py prints it
"""
