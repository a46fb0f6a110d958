"""The transformers backend: batched `generate` with left padding, sampling with one RNG per sample.

HF's own sampler draws a whole batch from one global RNG, so a sample would depend on its batch
mates. Here each row draws from its own seeded generator (a logits processor picks the token and
greedy decoding takes it), so a sample depends only on its seed and its logits; batching changes
nothing but the float rounding of padded rows. Results are bit-reproducible for a given batch_size
(and torch thread count, which the provenance records).
"""
from __future__ import annotations

from typing import Sequence

import torch
from transformers import AutoModelForCausalLM, GenerationConfig, LogitsProcessor, LogitsProcessorList
from transformers import StoppingCriteria, StoppingCriteriaList

from ewa.sample.backends import Backend, Completion
from ewa.chat import stop_token_ids


HEAD = 64  # tokens ranked per row and step when its nucleus fits in them (SeededSampler)


class SeededSampler(LogitsProcessor):
    """Temperature + top-p sampling where row i draws its t-th uniform from generator(seed_i)."""

    def __init__(self, seeds: Sequence[int], temperature: float, top_p: float, steps: int):
        self.temperature, self.top_p = temperature, top_p
        # All uniforms up front: one draw per row and step, whatever the other rows do.
        self.uniforms = torch.stack([torch.rand(steps, generator=torch.Generator().manual_seed(s), dtype=torch.float64)
                                     for s in seeds])
        self.step = 0

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        u = self.uniforms[:, self.step].to(scores.device)
        self.step += 1
        if self.temperature <= 0:
            return scores  # greedy
        probs = torch.softmax(scores.double() / self.temperature, dim=-1)
        chosen = torch.empty(len(probs), 1, dtype=torch.long, device=probs.device)
        wide = torch.ones(len(probs), dtype=torch.bool, device=probs.device)
        if self.top_p < 1 and probs.shape[-1] > HEAD:
            # Sorting the whole vocabulary every step was a sixth of a small model's sampling time: rank
            # only the HEAD most likely tokens of the rows whose nucleus lies within them (the draw is
            # then exactly the full sort's), and sort the other rows whole.
            head_p, head_ids = probs.topk(HEAD, dim=-1)
            wide = head_p.sum(-1) < self.top_p
            narrow = ~wide
            chosen[narrow] = self.draw(head_p[narrow], head_ids[narrow], u[narrow])
        if wide.any():
            chosen[wide] = self.draw(*probs[wide].sort(dim=-1, descending=True), u[wide])
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(1, chosen, 0.0)

    def draw(self, sorted_p: torch.Tensor, order: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Each row's token from its probabilities in descending order (`order`: their ids)."""
        if self.top_p < 1:
            # keep the smallest head whose mass reaches top_p (the top token always stays)
            sorted_p = sorted_p * ((sorted_p.cumsum(-1) - sorted_p) < self.top_p)
        cdf = sorted_p.cumsum(-1)
        pos = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1)).clamp_(max=cdf.shape[1] - 1)
        return order.gather(1, pos)


class RowBudget(StoppingCriteria):
    """Per-row max_new_tokens inside one batched generate call."""

    def __init__(self, prompt_len: int, budgets: Sequence[int]):
        self.prompt_len, self.budgets = prompt_len, torch.tensor(budgets)

    def __call__(self, input_ids, scores, **kwargs) -> torch.BoolTensor:
        return (input_ids.shape[1] - self.prompt_len) >= self.budgets.to(input_ids.device)


class StopOnText(StoppingCriteria):
    """Stop a row once its generated text contains a stop string.

    transformers' StopStringCriteria also matches across the prompt boundary (a prompt ending in
    "\\n" plus "\\n\\n\\n" stops at "\\n\\n\\n\\n"); vLLM and this class look only at generated text.
    """

    def __init__(self, tokenizer, prompt_len: int, stop: Sequence[str], rows: int):
        self.tokenizer, self.prompt_len, self.stop = tokenizer, prompt_len, list(stop)
        self.window = max(len(s) for s in self.stop) + 1  # tokens that can overlap a stop ending now
        self.done = torch.zeros(rows, dtype=torch.bool)

    def __call__(self, input_ids, scores, **kwargs) -> torch.BoolTensor:
        start = max(self.prompt_len, input_ids.shape[1] - self.window)
        tails = self.tokenizer.batch_decode(input_ids[:, start:], skip_special_tokens=True)
        for i, tail in enumerate(tails):
            if not self.done[i] and any(s in tail for s in self.stop):
                self.done[i] = True
        return self.done.to(input_ids.device)


class HFBackend(Backend):
    name = "hf"

    def __init__(self, model_dir: str, tokenizer, settings):
        self.tokenizer, self.batch_size = tokenizer, settings.batch_size
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = "auto" if self.device == "cuda" else torch.float32
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(self.device).eval()
        self.eos_ids = stop_token_ids(tokenizer, self.model.generation_config.eos_token_id)
        self.pad_id = tokenizer.pad_token_id
        self.context_length = getattr(self.model.config, "max_position_embeddings", None) or tokenizer.model_max_length
        self.info = {"device": self.device, "dtype": str(self.model.dtype), "torch_threads": torch.get_num_threads(),
                     "batch_size": self.batch_size}

    @torch.inference_mode()
    def generate(self, prompts, seeds, max_new_tokens, temperature, top_p, stop=()):
        budgets = [max_new_tokens] * len(prompts) if isinstance(max_new_tokens, int) else list(max_new_tokens)
        out = []
        for i in range(0, len(prompts), self.batch_size):
            sl = slice(i, i + self.batch_size)
            out += self._generate_batch(prompts[sl], seeds[sl], budgets[sl], temperature, top_p, list(stop))
        return out

    def _generate_batch(self, prompts, seeds, budgets, temperature, top_p, stop):
        enc = self.tokenizer(list(prompts), return_tensors="pt", padding=True, padding_side="left",
                             add_special_tokens=False).to(self.device)
        prompt_len, steps = enc["input_ids"].shape[1], max(budgets)
        config = GenerationConfig(max_new_tokens=steps, do_sample=False, num_beams=1,
                                  eos_token_id=self.eos_ids, pad_token_id=self.pad_id)
        criteria = StoppingCriteriaList()
        if min(budgets) < steps:
            criteria.append(RowBudget(prompt_len, budgets))
        if stop:
            criteria.append(StopOnText(self.tokenizer, prompt_len, stop, len(prompts)))
        ids = self.model.generate(
            **enc, generation_config=config,
            logits_processor=LogitsProcessorList([SeededSampler(seeds, temperature, top_p, steps)]),
            stopping_criteria=criteria,
        )
        return [self._completion(row[prompt_len:].tolist(), stop) for row in ids]

    def _completion(self, ids: list[int], stop: list[str]) -> Completion:
        eos = set(self.eos_ids)
        end = next((j + 1 for j, t in enumerate(ids) if t in eos), None)
        if end is None:  # rows that stopped early (stop string, own budget) are right-padded
            end = len(ids)
            while end and ids[end - 1] == self.pad_id:
                end -= 1
        text = self.tokenizer.decode(ids[:end], skip_special_tokens=True)
        finish = "stop" if end and ids[end - 1] in eos else "length"
        hits = [(text.find(s), s) for s in stop if s in text]
        if hits:
            at, s = min(hits)
            text, finish = text[:at + len(s)], "stop"
        return Completion(text=text, token_count=end, finish_reason=finish)
