"""`ewa gpu-check`: the GPU paths of the pipeline checked on a new node against the CPU's, in minutes
(ewa.gpucheck.cli); what the checks work on (bench), the checks (checks), and the training-step memory
measured against `ewa plan` (memory)."""
