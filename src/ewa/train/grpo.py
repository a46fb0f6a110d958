"""GRPO (TRL's GRPOTrainer) from the shared init for one coverage regime. Every regime's run has the same
init, seed and data order; only the reward's test tier differs, unless a regime's seed_stream gives its run
a seed of its own (grpo_seed: the same-regimes control's two trainings on one reward).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from contextlib import nullcontext
from pathlib import Path

from ewa.checkpoint import check_loadable, check_loaded, check_model_dir
from ewa.errors import UserError
from ewa.init import PROVENANCE_FILE
from ewa.io import atomic_path, exclusive_output, provenance, sha256_file, write_json
from ewa.problems import Problem, read_problems
from ewa.progress import Progress, quiet_bars, quiet_trainer, trainer_callback
from ewa.runtime import checkpointing_arg, compute_record
from ewa.tiers import TierError, regime_tests
from ewa.trackers import point_tensorboard, tensorboard_dir
from ewa.verdicts import VERDICTS

log = logging.getLogger(__name__)

# Settings that may change between a killed run and its resumption (extending a run is fine).
RESUMABLE_CHANGES = ("max_steps", "save_steps", "save_total_limit", "keep_work_dir", "report_to")
METRICS = {  # metrics.csv column <- trainer log key
    "reward": "reward", "reward_std": "reward_std", "frac_reward_zero_std": "frac_reward_zero_std",
    "kl": "kl", "entropy": "entropy", "loss": "loss", "grad_norm": "grad_norm", "learning_rate": "learning_rate",
    "completion_length": "completions/mean_length", "clipped_ratio": "completions/clipped_ratio",
    "step_time_s": "step_time", "reward_time_s": "reward_time_s", "completions": "completions_judged",
    "programs_run": "programs_run",
}
VERDICT_COLUMNS = (*VERDICTS, "no_code")


def batch_shape(s: dict, world_size: int) -> tuple[int, int]:
    """(per-device batch, accumulation steps) so that one optimizer step consumes one generation batch."""
    completions = s["prompts_per_step"] * s["num_generations"]
    per_device = s["per_device_train_batch_size"] or completions // world_size
    if per_device < 1 or completions % (per_device * world_size):
        raise ValueError(f"grpo.per_device_train_batch_size: {per_device} x {world_size} processes does not divide "
                         f"the {completions} completions of a step")
    return per_device, completions // (per_device * world_size)


def grpo_config(s: dict, work_dir: Path, seed: int, world_size: int = 1, run_name: str = "ewa-grpo"):
    import torch
    from trl import GRPOConfig

    from ewa.trackers import trainer_args

    per_device, accumulation = batch_shape(s, world_size)
    if s["trl"].get("vllm_mode", "colocate") != "colocate":
        # nothing starts a `trl vllm-serve`: a trainer in server mode would wait for one that never comes
        raise UserError("grpo.trl.vllm_mode: only colocate is supported (vLLM runs inside the training processes)")
    vllm = {"vllm_mode": "colocate", "vllm_gpu_memory_utilization": s["vllm_gpu_memory_utilization"],
            "vllm_tensor_parallel_size": s["vllm_tensor_parallel_size"]} if s["use_vllm"] else {}
    kwargs = dict(
        output_dir=str(work_dir),
        max_steps=s["max_steps"],
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=accumulation,
        num_generations=s["num_generations"],
        learning_rate=s["learning_rate"],
        lr_scheduler_type=s["lr_scheduler_type"],
        warmup_steps=s["warmup_steps"],
        beta=s["beta"],
        epsilon=s["epsilon"],
        num_iterations=s["num_iterations"],
        loss_type=s["loss_type"],
        scale_rewards=s["scale_rewards"],
        max_grad_norm=s["max_grad_norm"],
        max_completion_length=s["max_completion_length"],
        temperature=s["temperature"],
        top_p=s["top_p"],
        logging_steps=1,  # metrics.csv has one row per step
        save_strategy="steps",
        save_steps=s["save_steps"],
        save_total_limit=s["save_total_limit"],
        # grpo.report_to (ewa.trackers): none unless the config names a tracker
        **trainer_args(s.get("report_to"), "grpo.report_to", run_name),
        seed=seed,
        data_seed=seed,
        shuffle_dataset=True,
        disable_dropout=True,
        use_cpu=not torch.cuda.is_available(),
        bf16=bool(s["bf16"]),  # left unset, TRL turns bf16 on (autocast, on the CPU too): the miniature is fp32
        **checkpointing_arg(bool(s["gradient_checkpointing"])),
        # fp32 parameters even for bf16 training: bf16 is the compute precision (autocast; FSDP2's and DeepSpeed's
        # bf16 mixed precision), never the storage of what AdamW updates. In bf16 weights an update of lr 1e-6 is
        # far below half a bf16 step, so it rounds away. DeepSpeed casts the loaded model to bf16 itself and keeps
        # fp32 master weights in its optimizer; accelerate's FSDP2 upcasts to fp32 anyway. TRL loads the
        # reference model with the same kwargs.
        model_init_kwargs={"dtype": "float32"},
        use_vllm=bool(s["use_vllm"]),
        **vllm,
    )
    check_master_weights(s)
    kwargs.update(s["trl"])  # explicit passthrough wins over the derived values
    return GRPOConfig(**kwargs)


def check_master_weights(s: dict) -> None:
    """Refuse a passthrough that would load the trained parameters in 16 bits: without DeepSpeed (one process,
    DDP, FSDP1) AdamW would then keep 16-bit weights and moments and updates at the configs' learning rate
    vanish without an error."""
    given = s["trl"].get("model_init_kwargs") or {}
    dtype = str(given.get("dtype", given.get("torch_dtype", "float32")))
    if dtype.removeprefix("torch.") != "float32":  # "auto" too: it loads what the checkpoint holds (bf16)
        raise UserError(f"grpo.trl.model_init_kwargs: dtype {dtype} would keep the trained weights and AdamW's "
                        f"moments in 16 bits, where updates below half a step (as at learning_rate 1e-6) vanish; "
                        f"leave it out: ewa loads float32 and grpo.bf16 trains in bf16 mixed precision")


def check_problems(problems: list[Problem], regime: dict, path) -> None:
    if not problems:
        raise UserError(f"--problems: {path} holds no problems")
    for p in problems:
        try:
            regime_tests(p, regime)
        except TierError as e:
            raise UserError(f"--regime: {e}") from None


def check_init(init: str | os.PathLike) -> Path:
    """An init the trainer loads whole (headers against config.json), with a tokenizer and chat template."""
    path = check_model_dir(init)
    config = path / "tokenizer_config.json"
    has_template = (path / "chat_template.jinja").is_file() or (
        config.is_file() and "chat_template" in json.loads(config.read_text()))
    if not has_template:
        raise UserError(f"--init: {path} has no chat template (chat_template.jinja or tokenizer_config.json)")
    check_loadable(path, "--init")
    return path


def init_fingerprint(init: Path) -> dict:
    """Identifies the init by content without hashing gigabytes (the merge's sampled weight hash),
    so a copied or re-made identical init resumes, and a SLURM run records what a local run does."""
    from ewa.checkpoint import fingerprint, read_checkpoint

    stamp = init / PROVENANCE_FILE
    return {**fingerprint(read_checkpoint(init)),
            "ewa_init_sha256": sha256_file(stamp) if stamp.is_file() else None}


def grpo_seed(seed: int, regime: dict) -> int:
    """The seed (and data order) of one regime's run: the replicate's seed, or with the regime's seed_stream
    a 31-bit seed drawn from both, so two regimes with one reward are two trainings in every replicate."""
    stream = regime.get("seed_stream")
    if stream is None:
        return seed
    digest = hashlib.sha256(f"ewa-grpo:{seed}:{stream}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def init_seed(init: Path) -> int | None:
    """The seed the init was built with (its provenance record), so each run's record shows which init it shares."""
    stamp = init / PROVENANCE_FILE
    try:
        return json.loads(stamp.read_text()).get("seed") if stamp.is_file() else None
    except (OSError, ValueError):
        return None


def work_dir_for(out: Path) -> Path:
    return out.parent / f".{out.name}.work"


def checkpoints(work: Path) -> list[Path]:
    """Trainer checkpoints in `work`, newest first."""
    found = [d for d in work.glob("checkpoint-*") if d.is_dir() and d.name.split("-", 1)[1].isdigit()]
    return sorted(found, key=lambda d: int(d.name.split("-", 1)[1]), reverse=True)


def resume_point(work: Path, fingerprint: dict) -> str | None:
    """The newest complete checkpoint a run with the same settings left in `work`, if any.

    The trainer writes trainer_state.json last, so a checkpoint without it was cut off mid-write.
    """
    stamp = work / "ewa_run.json"
    if not (stamp.is_file() and json.loads(stamp.read_text()) == fingerprint):
        return None
    return next((str(d) for d in checkpoints(work) if (d / "trainer_state.json").is_file()), None)


def prepare_work_dir(work: Path, fingerprint: dict, resume: str | None) -> None:
    """Drop checkpoints newer than `resume` (cut off by a kill), or start a fresh work dir."""
    if resume is not None:
        for d in checkpoints(work):
            if d.name == Path(resume).name:
                break
            shutil.rmtree(d)
        return
    if work.exists():
        log.warning("%s holds no resumable run with these settings; starting over", work)
        shutil.rmtree(work)
    work.mkdir(parents=True)
    write_json(work / "ewa_run.json", fingerprint)


def describe_step(logs: dict, step: int, max_steps: int) -> str:
    """One logging step of GRPO as a line: the reward and the share of groups without spread (where GRPO
    learns nothing), the rollouts' verdicts, KL, completion length and step time (all of it in metrics.csv).

    >>> describe_step({"reward": 0.25, "frac_reward_zero_std": 0.5, "verdicts/AC": 2, "verdicts/TLE": 1,
    ...                "verdicts/WA": 3, "verdicts/no_code": 2, "verdicts/CE": 2, "kl": 0.0012,
    ...                "completions/mean_length": 48.2, "step_time": 3.1}, 3, 10)
    'step 3/10 | reward 0.250, no-spread groups 50% | AC 2, TLE+MLE 1, WA+RE+CE 3, no code 2 | KL 0.0012 | length 48 | 3.1 s/step'
    """
    parts = [f"step {step}/{max_steps}"]
    if "reward" in logs:
        spread = logs.get("frac_reward_zero_std")
        parts.append(f"reward {logs['reward']:.3f}" + ("" if spread is None else f", no-spread groups {spread:.0%}"))
    if any(k.startswith("verdicts/") for k in logs):
        n = {v: int(logs.get(f"verdicts/{v}", 0) or 0) for v in VERDICT_COLUMNS}
        code_ce = n["CE"] - n["no_code"]  # a sample without code is CE too; counted once, as no code
        parts.append(f"AC {n['AC']}, TLE+MLE {n['TLE'] + n['MLE']}, WA+RE+CE {n['WA'] + n['RE'] + code_ce}, "
                     f"no code {n['no_code']}")
    if "kl" in logs:
        parts.append(f"KL {logs['kl']:.2g}")
    if "completions/mean_length" in logs:
        parts.append(f"length {logs['completions/mean_length']:.0f}")
    if "step_time" in logs:
        parts.append(f"{logs['step_time']:.2g} s/step")
    if "loss" in logs and "reward" not in logs:
        parts.append(f"loss {logs['loss']:.4g}")
    return " | ".join(parts)


def metrics_frame(log_history: list[dict]):
    """One row per optimizer step: reward, verdict mix, KL, completion length, step time."""
    import pandas as pd

    rows = []
    for entry in log_history:
        if "reward" not in entry:
            continue
        row = {"step": entry["step"]}
        row.update({col: entry.get(key) for col, key in METRICS.items()})
        row.update({f"verdict_{v}": entry.get(f"verdicts/{v}") for v in VERDICT_COLUMNS})
        rows.append(row)
    return pd.DataFrame(rows, columns=["step", *METRICS, *(f"verdict_{v}" for v in VERDICT_COLUMNS)])


def train_regime(init: str | os.PathLike, problems_path: str | os.PathLike, regime: dict, settings: dict,
                 out: str | os.PathLike, seed: int, sandbox: dict, calibration: str | None = None) -> dict:
    """GRPO-train one regime from `init`; writes the HF model, metrics.csv and ewa_train.json to `out`.
    `settings` and `sandbox` are the config's validated `grpo` and `sandbox` sections."""
    s = settings
    check_master_weights(s)  # before anything is written
    init = check_init(init)
    problems = read_problems(problems_path)
    check_problems(problems, regime, problems_path)

    from accelerate import PartialState
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from ewa.prompts import reasoning_messages
    from ewa.sandbox import sandbox_from_config
    from ewa.train.reward import CoverageReward

    out = Path(out)
    work = work_dir_for(out)
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    fingerprint = {"init": init_fingerprint(init), "problems_sha256": sha256_file(problems_path),
                   "regime": regime, "seed": seed,
                   "settings": {k: v for k, v in s.items() if k not in RESUMABLE_CHANGES}}
    # The same rows in the same order for every regime; the trainer's seeded sampler shuffles them.
    dataset = Dataset.from_list([{"prompt": reasoning_messages(p), "problem_id": p.id} for p in problems])
    tokenizer = AutoTokenizer.from_pretrained(init)
    state = PartialState()
    # One run per regime output. Only the main process locks: it alone prunes the work dir and publishes,
    # and if the lock refuses it, the launcher stops the other ranks waiting at the barrier. The lock
    # covers the work dir a resumed run reads, and clears what killed runs left of `out`.
    # steps of max_steps: one line per logging step (not TRL's dictionaries) and the job's progress file
    meter = (Progress("train", s["max_steps"], "steps", out=out, label=f"ewa train {regime['name']}")
             if state.is_main_process else None)
    with exclusive_output(out, work, what="ewa train") if state.is_main_process else nullcontext(), \
            meter or nullcontext():
        # One sandbox for the whole run, not one per step; each rank of a multi-GPU run opens its own.
        with sandbox_from_config(sandbox, calibration=calibration) as sandbox:
            judged_by = sandbox.info()
            from ewa.sandbox.semantics import provenance as judge_provenance
            judged_by["judge"] = judge_provenance(p.judge for p in problems)
            reward = CoverageReward({p.id: p for p in problems}, regime, sandbox, s["reward"])
            resume = resume_point(work, fingerprint)  # every rank decides from the same untouched work dir
            state.wait_for_everyone()
            if state.is_main_process:
                prepare_work_dir(work, fingerprint, resume)
            state.wait_for_everyone()
            if resume:
                log.info("resuming from %s", resume)
            from ewa.train.outcome import no_signal_callback  # one line when step 1's groups (the init's) never mix

            quiet_bars()
            callbacks = [no_signal_callback(regime["name"])] + ([trainer_callback(meter, describe_step)] if meter else [])
            trainer = GRPOTrainer(model=str(init), reward_funcs=reward,
                                  args=grpo_config(s, work, grpo_seed(seed, regime), world_size,
                                                   run_name=f"seed{seed}-{regime['name']}"),
                                  train_dataset=dataset, processing_class=tokenizer, callbacks=callbacks)
            quiet_trainer(trainer)
            point_tensorboard(trainer, tensorboard_dir(out))
            check_loaded(trainer.model, init, "--init")  # TRL loads the init: nothing it filled at random
            trainer.train(resume_from_checkpoint=resume)
            final = work / "final"
            trainer.save_model(str(final))  # collective under ZeRO-3/FSDP: every rank calls it
        if not trainer.accelerator.is_main_process:
            return {}
        record = provenance(
            s, regime=regime, seed=seed, grpo_seed=grpo_seed(seed, regime), init=str(init), init_seed=init_seed(init),
            problems=str(problems_path),
            problems_sha256=fingerprint["problems_sha256"], sandbox=judged_by, init_fingerprint=fingerprint["init"],
            global_step=trainer.state.global_step, resumed_from=resume, compute=compute_record(),
        )
        with atomic_path(out) as tmp:
            os.replace(final, tmp)
            (tmp / "training_args.bin").unlink(missing_ok=True)  # a pickle; ewa_train.json records the settings
            tokenizer.save_pretrained(tmp)
            metrics_frame(trainer.state.log_history).to_csv(tmp / "metrics.csv", index=False)
            from ewa.train.outcome import training_outcome  # did GRPO move the weights at all (one warning if not)

            record.update(training_outcome(init, tmp, trainer.state.log_history, regime["name"]))
            write_json(tmp / "ewa_train.json", record)
        if not s["keep_work_dir"]:
            shutil.rmtree(work, ignore_errors=True)
    return record
