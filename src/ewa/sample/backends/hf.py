"""The transformers backend: a batched decode loop with left padding, one RNG per sample, and finished
rows dropped from the batch.

HF's own sampler draws a whole batch from one global RNG, so a sample would depend on its batch
mates. Here each row draws from its own seeded generator (SeededSampler), so a sample depends only on
its seed and its logits; batching changes nothing but the float rounding of padded rows. Results are
bit-reproducible for a given batch_size (and torch thread count, which the provenance records).

`generate` would keep every row in the batch until the longest is done; on a CPU a decode step costs
in proportion to the rows it carries, and tool calls and answers vary from ~20 to the full budget of
tokens, so the loop here drops a row (and its KV cache) as soon as it ends.
"""
from __future__ import annotations

from typing import Sequence

import torch
from transformers import AutoModelForCausalLM, DynamicCache, LogitsProcessor

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
        """As a logits processor for `generate`: every score but the chosen token's is -inf."""
        chosen = self.choose(scores, self.uniforms[:, self.step])
        self.step += 1
        return torch.full_like(scores, float("-inf")).scatter_(1, chosen, 0.0)

    def choose(self, scores: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """The token (a column of ids) each row draws with its uniform u."""
        if self.temperature <= 0:
            return scores.argmax(-1, keepdim=True)  # greedy
        u = u.to(scores.device)
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
        return chosen

    def draw(self, sorted_p: torch.Tensor, order: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Each row's token from its probabilities in descending order (`order`: their ids)."""
        if self.top_p < 1:
            # keep the smallest head whose mass reaches top_p (the top token always stays)
            sorted_p = sorted_p * ((sorted_p.cumsum(-1) - sorted_p) < self.top_p)
        cdf = sorted_p.cumsum(-1)
        pos = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1)).clamp_(max=cdf.shape[1] - 1)
        return order.gather(1, pos)


class HFBackend(Backend):
    name = "hf"

    def __init__(self, model_dir: str, tokenizer, settings):
        self.tokenizer, self.batch_size = tokenizer, settings.batch_size
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = "auto" if self.device == "cuda" else torch.float32
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(self.device).eval()
        self.eos_ids = stop_token_ids(tokenizer, self.model.generation_config.eos_token_id)
        self.context_length = getattr(self.model.config, "max_position_embeddings", None) or tokenizer.model_max_length
        self.info = {"device": self.device, "dtype": str(self.model.dtype), "torch_threads": torch.get_num_threads(),
                     "batch_size": self.batch_size}

    @torch.inference_mode()
    def generate(self, prompts, seeds, max_new_tokens, temperature, top_p, stop=()):
        budgets = [max_new_tokens] * len(prompts) if isinstance(max_new_tokens, int) else list(max_new_tokens)
        # Batches of similar prompt lengths: a batch is padded to its longest prompt (later turns of tools
        # and agentic conversations differ by hundreds of tokens). The order is a function of the prompts,
        # so a sample still depends only on its seed and the call's prompts.
        prompt_ids = self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
        order = sorted(range(len(prompts)), key=lambda i: (len(prompt_ids[i]), i))
        out = [None] * len(prompts)
        for i in range(0, len(order), self.batch_size):
            rows = order[i:i + self.batch_size]
            done = self._generate_batch([prompt_ids[r] for r in rows], [seeds[r] for r in rows],
                                        [budgets[r] for r in rows], temperature, top_p, list(stop))
            for r, completion in zip(rows, done):
                out[r] = completion
        return out

    def _generate_batch(self, prompt_ids, seeds, budgets, temperature, top_p, stop):
        enc = self.tokenizer.pad({"input_ids": prompt_ids}, padding=True, padding_side="left",
                                 return_tensors="pt").to(self.device)
        mask = enc["attention_mask"]
        sampler = SeededSampler(seeds, temperature, top_p, max(budgets))
        eos = torch.tensor(self.eos_ids, device=self.device)
        budget = torch.tensor(budgets, device=self.device)
        rows = torch.arange(len(prompt_ids), device=self.device)  # the batch rows still generating
        generated = [[] for _ in prompt_ids]
        cache = DynamicCache(config=self.model.config)
        tokens = enc["input_ids"]
        for step in range(max(budgets)):
            logits = self.model(input_ids=tokens, attention_mask=mask, position_ids=self._positions(mask, tokens),
                                past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :].float()
            tokens = sampler.choose(logits, sampler.uniforms[rows, step])
            done = torch.isin(tokens[:, 0], eos) | (step + 1 >= budget[rows])
            for row, token in zip(rows.tolist(), tokens[:, 0].tolist()):
                generated[row].append(token)
            if stop:
                done |= self._stopped(generated, rows, stop)
            if bool(done.all()):
                break
            mask = torch.cat([mask, mask.new_ones(len(mask), 1)], dim=1)
            if bool(done.any()):
                keep = (~done).nonzero().squeeze(1)
                cache.batch_select_indices(keep)
                rows, tokens, mask = rows[keep], tokens[keep], mask[keep]
        return [self._completion(ids, stop) for ids in generated]

    @staticmethod
    def _positions(mask: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Positions of the new tokens, counted from each row's first real (unpadded) token."""
        return (mask.cumsum(-1) - 1).clamp_(min=0)[:, -tokens.shape[1]:]

    def _stopped(self, generated, rows, stop) -> torch.Tensor:
        """Rows whose generated text now contains a stop string (vLLM's rule: the prompt never counts)."""
        window = max(len(s) for s in stop) + 1  # tokens that can overlap a stop ending now
        tails = self.tokenizer.batch_decode([generated[r][-window:] for r in rows.tolist()], skip_special_tokens=True)
        return torch.tensor([any(s in tail for s in stop) for tail in tails], device=rows.device)

    def _completion(self, ids: list[int], stop: list[str]) -> Completion:
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        finish = "stop" if ids and ids[-1] in self.eos_ids else "length"  # a row ends at its first eos
        hits = [(text.find(s), s) for s in stop if s in text]
        if hits:
            at, s = min(hits)
            text, finish = text[:at + len(s)], "stop"
        return Completion(text=text, token_count=len(ids), finish_reason=finish)
