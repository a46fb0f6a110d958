"""Whether training moved the weights, and whether the merge's endpoints differ at all.

GRPO learns only from groups whose rewards differ: a model that solves nothing (or everything) on the
training problems gets advantage 0 for every completion, a zero gradient, and comes out bit-identical to
its init. Every alpha of a merge of two such checkpoints is then the same model, and any difference
between alphas is sampling noise. The train job records what happened (`weights_changed` in
ewa_train.json, with a digest of the weights), the merge job names identical endpoints in its log, and
`ewa claims` reads every claim over them as untestable rather than as a verdict. The analysis imports
this module and must not pay for torch: the checkpoint readers load only when a check runs.
"""
from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

TRAIN_RECORD = "ewa_train.json"
IDENTICAL = "untestable (endpoints identical)"  # every claim over two checkpoints with the same weights
UNCHANGED = "unchanged from the init)"  # the end of the verdict when one endpoint never left the init


def first_difference(a: str | os.PathLike, b: str | os.PathLike) -> str | None:
    """The first tensor (by name) in which two checkpoints differ, or None when every tensor is equal.

    a's tensors are cast to b's dtype first, so an fp32 init and the bf16 model it was trained into
    compare as the trainer saw them. Streams one tensor pair at a time and stops at the first
    difference: cheap when training moved the weights, a full read only when it did not.
    """
    import torch

    from ewa.checkpoint import ShardReader, read_checkpoint

    ca, cb = read_checkpoint(a), read_checkpoint(b)
    if set(ca.specs) != set(cb.specs):
        return next(iter(sorted(set(ca.specs) ^ set(cb.specs))))
    ra, rb = ShardReader(ca), ShardReader(cb)
    try:
        for name in cb.weight_map:
            x, y = ra.get(name), rb.get(name)
            if x.shape != y.shape or not torch.equal(x.to(y.dtype), y):
                return name
    finally:
        ra.close()
        rb.close()
    return None


def weights_digest(model_dir: str | os.PathLike) -> dict:
    """sha256 of every weight file (and the index), by file name: equal digests, equal weights."""
    from ewa.checkpoint import fingerprint, read_checkpoint

    record = fingerprint(read_checkpoint(model_dir), mode="full")
    return {"files": record["files"], **({"index_sha256": record["index_sha256"]} if "index_sha256" in record else {})}


def training_outcome(init: str | os.PathLike, out: str | os.PathLike, log_history: list[dict], regime: str) -> dict:
    """What ewa_train.json records about the run's effect: whether the weights moved from the init, how
    often a group's rewards varied (GRPO's only signal), and the weights' digest (so `ewa claims` can tell
    identical endpoints apart without reading them). Logs one warning line when the weights did not move."""
    steps = [e for e in log_history if "reward" in e]
    rewards = [e["reward"] for e in steps]
    varied = [1.0 - e["frac_reward_zero_std"] for e in steps if e.get("frac_reward_zero_std") is not None]
    changed = first_difference(init, out)
    record = {
        "weights_changed": changed is not None,
        "first_changed_tensor": changed,
        "steps_with_signal": sum(v > 0 for v in varied),
        "mean_reward": sum(rewards) / len(rewards) if rewards else None,
        # step 1's rollouts come from the init itself: the signal `ewa signal` estimates, as GRPO saw it
        "first_step": {"mixed_share": varied[0] if varied else None, "mean_reward": rewards[0] if rewards else None},
        "weights_digest": weights_digest(out),
    }
    if changed is None:
        why = ("GRPO had no signal to learn from" if not record["steps_with_signal"] else
               "its updates changed no saved weight (a learning rate of 0, or steps below the saved precision)")
        log.warning("regime %s: the trained weights are identical to the init after %d steps (rewards varied within "
                    "a group in %d of them, mean reward %s): %s", regime, len(steps), record["steps_with_signal"],
                    "n/a" if record["mean_reward"] is None else f"{record['mean_reward']:.3f}", why)
    return record


def first_step_warning(logs: dict, regime: str) -> str | None:
    """The line the train job logs after GRPO's first step when none of its groups had mixed rewards: that
    step's rollouts are the init's own, so GRPO cannot move the weights until a later group happens to mix."""
    share = logs.get("frac_reward_zero_std")
    if share is None or share < 1:
        return None
    return (f"regime {regime}: no group of GRPO's first step had mixed rewards "
            f"(mean reward {logs.get('reward', 0):.3f}; those are the init's own samples): the gradient is 0 "
            "until one does (`ewa signal` measures this before training)")


def no_signal_callback(regime: str):
    """A TrainerCallback that logs first_step_warning once, on the main process."""
    from transformers import TrainerCallback

    class NoSignalWarning(TrainerCallback):
        def __init__(self):
            self.seen = False

        def on_log(self, args, state, control, logs=None, **kwargs):
            if self.seen or not logs or "reward" not in logs:
                return
            self.seen = True  # a resumed run's first log is a later step's: not the init's samples
            if state.global_step == 1 and state.is_world_process_zero and (line := first_step_warning(logs, regime)):
                log.warning(line)

    return NoSignalWarning()


@dataclass(frozen=True)
class Endpoints:
    """What the alpha grid rests on: whether the two endpoints are the same weights, and which of them did
    not move from the init (regime names, from their train records)."""
    identical: bool
    unchanged: tuple[str, ...] = ()

    @property
    def untestable(self) -> str | None:
        """The verdict every claim over these endpoints reads instead of one, or None when they are testable."""
        if self.identical:
            return IDENTICAL
        if self.unchanged:
            return f"untestable ({' and '.join(self.unchanged)} {UNCHANGED}"
        return None

    @property
    def why(self) -> str:
        if self.identical:
            how = "GRPO moved neither from the init" if len(self.unchanged) == 2 else "the same weights"
            return f"the low and high checkpoints are identical: {how}, so every alpha is the same model"
        if self.unchanged:
            return (f"GRPO did not move {' and '.join(self.unchanged)} from the init: the grid compares the init "
                    "with a trained checkpoint, not two coverage regimes")
        return ""


def train_record(model_dir: Path) -> dict:
    path = model_dir / TRAIN_RECORD
    return json.loads(path.read_text()) if path.is_file() else {}


def endpoints(low: str | os.PathLike, high: str | os.PathLike) -> Endpoints:
    """Compare the merge's endpoints: by their train records where both have them (no weights read), else
    tensor by tensor."""
    ends = [(Path(d), train_record(Path(d))) for d in (low, high)]
    unchanged = tuple(r.get("regime", {}).get("name", d.name) for d, r in ends if r.get("weights_changed") is False)
    (_, a), (_, b) = ends
    if len(unchanged) == 2 and a.get("init_fingerprint") == b.get("init_fingerprint"):
        identical = True  # both are still their (one) init
    elif a.get("weights_digest") and b.get("weights_digest"):
        identical = a["weights_digest"] == b["weights_digest"]
    else:  # made before the records said, or not by `ewa train`
        identical = first_difference(low, high) is None
    return Endpoints(identical=identical, unchanged=unchanged)


def warn_if_untestable(low: str | os.PathLike, high: str | os.PathLike, what: str) -> Endpoints:
    """The merge job's check: one warning line (stderr, the job's log) when the endpoints cannot differ."""
    state = endpoints(low, high)
    if state.untestable:
        print(f"{what}: warning: {state.why} ({low}, {high})", file=sys.stderr)
    return state
