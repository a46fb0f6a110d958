"""The transformers backend: a batched decode loop with left padding, one RNG per sample, and finished
rows dropped from the batch.

HF's own sampler draws a whole batch from one global RNG, so a sample would depend on its batch
mates. Here each row draws from its own seeded generator (SeededSampler), so a sample depends only on
its seed and its logits; batching changes nothing but the float rounding of padded rows. Results are
bit-reproducible for a given batch_size (and torch thread count, which the provenance records).

`generate` would keep every row in the batch until the longest is done; on a CPU a decode step costs
in proportion to the rows it carries, and tool calls and answers vary from ~20 to the full budget of
tokens, so the loop here drops a row (and its KV cache) as soon as it ends.

Prompts that share a prefix are prefilled through it once (vLLM's prefix caching, within one call): the
n samples of a problem share their whole first prompt, and a later turn of a tools or agentic
conversation shares the turns before it with the problem's other samples. The shared prefix's KV cache
is computed once per group and copied to its rows; each row then prefills only the rest of its prompt.

The KV cache grows in place (RoomyLayer): transformers' DynamicLayer concatenates every step, copying
the whole cache of every layer to append one token (a sixth of a miniature tools job's time).
"""
from __future__ import annotations

from typing import Sequence

import torch
from transformers import AutoModelForCausalLM, DynamicCache, LogitsProcessor
from transformers.cache_utils import DynamicLayer

from ewa.checkpoint import check_loadable, check_loaded
from ewa.sample.backends import Backend, Completion
from ewa.chat import stop_token_ids


HEAD = 64  # tokens ranked per row and step when its nucleus fits in them (SeededSampler)


class SeededSampler(LogitsProcessor):
    """Temperature + top-p sampling where row i draws its t-th uniform from generator(seed_i)."""

    def __init__(self, seeds: Sequence[int], temperature: float, top_p: float, steps: int,
                 device: str | torch.device = "cpu"):
        self.temperature, self.top_p = temperature, top_p
        # All uniforms up front: one draw per row and step, whatever the other rows do. They are drawn on
        # the host (a CPU generator gives the same stream on every machine) and live where the model does,
        # since the decode loop indexes them with its rows.
        self.uniforms = torch.stack([torch.rand(steps, generator=torch.Generator(device="cpu").manual_seed(s),
                                                dtype=torch.float64, device="cpu") for s in seeds]).to(device)
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
            # Sorting the whole vocabulary every step is a large share of a small model's sampling time:
            # rank only the HEAD most likely tokens of the rows whose nucleus lies within them (the draw is
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


class RoomyLayer(DynamicLayer):
    """A DynamicLayer whose keys and values are views of buffers with `room` spare positions: a step
    writes its token in place instead of concatenating, and a buffer grows only when full. Attention
    reads the same values in the same shapes, so logits are bit-identical to DynamicLayer's."""

    def __init__(self, room: int):
        super().__init__()
        self.room = room
        self._keys = self._values = None

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start = self.get_seq_length()
        end = start + key_states.shape[-2]
        if self._keys is None or end > self._keys.shape[-2]:
            self._keys, self._values = (self._grown(b, s, start, end + self.room)
                                        for b, s in ((self._keys, key_states), (self._values, value_states)))
        self._keys[..., start:end, :] = key_states
        self._values[..., start:end, :] = value_states
        self._view(end)
        return self.keys, self.values

    @staticmethod
    def _grown(buffer, states, length, capacity):
        grown = states.new_zeros((*states.shape[:-2], capacity, states.shape[-1]))
        if buffer is not None:
            grown[..., :length, :] = buffer[..., :length, :]
        return grown

    def _view(self, length):
        self.keys, self.values = self._keys[..., :length, :], self._values[..., :length, :]

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if length := self.get_seq_length():
            self._keys, self._values = self._keys[indices, ...], self._values[indices, ...]
            self._view(length)

    # The parent's other edits replace keys and values: those become the buffers (full, so the next
    # update grows them).
    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)
        self._adopt()

    def batch_repeat_interleave(self, repeats: int) -> None:
        super().batch_repeat_interleave(repeats)
        self._adopt()

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        super().reorder_cache(beam_idx)
        self._adopt()

    def reset(self) -> None:
        super().reset()
        self._keys = self._values = None

    def _adopt(self):
        if self.get_seq_length():
            self._keys, self._values = self.keys, self.values


def roomy_cache(config, room: int) -> DynamicCache:
    """A DynamicCache whose full-attention layers grow in place (sliding-window layers stay as they are)."""
    cache = DynamicCache(config=config)
    cache.layers = [RoomyLayer(room) if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


class HFBackend(Backend):
    name = "hf"

    def __init__(self, model_dir: str, tokenizer, settings, device: str | None = None):
        """`device`: where the model runs (default: CUDA when present, else the CPU)."""
        self.tokenizer, self.batch_size = tokenizer, settings.batch_size
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        dtype = "auto" if self.device.type == "cuda" else torch.float32
        # transformers fills a missing tensor at random and carries on: refuse before and check after
        check_loadable(model_dir, "--model")
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
        check_loaded(model, model_dir, "--model")
        self.model = model.to(self.device).eval()
        self.eos_ids = stop_token_ids(tokenizer, self.model.generation_config.eos_token_id)
        self.context_length = getattr(self.model.config, "max_position_embeddings", None) or tokenizer.model_max_length
        self.info = {"device": str(self.device), "dtype": str(self.model.dtype), "torch_threads": torch.get_num_threads(),
                     "batch_size": self.batch_size}

    @torch.inference_mode()
    def generate(self, prompts, seeds, max_new_tokens, temperature, top_p, stop=()):
        budgets = [max_new_tokens] * len(prompts) if isinstance(max_new_tokens, int) else list(max_new_tokens)
        # The batches are a function of the prompts, so a sample still depends only on its seed and the
        # call's prompts.
        prompt_ids = self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
        order = batch_order(prompt_ids)
        out = [None] * len(prompts)
        for i in range(0, len(order), self.batch_size):
            rows = order[i:i + self.batch_size]
            done = self._generate_batch([prompt_ids[r] for r in rows], [seeds[r] for r in rows],
                                        [budgets[r] for r in rows], temperature, top_p, list(stop))
            for r, completion in zip(rows, done):
                out[r] = completion
        return out

    def _pad(self, ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-padded token ids and their attention mask, made on the model's device (the tokenizer pads
        lists; tensors it made would live on torch's default device)."""
        enc = self.tokenizer.pad({"input_ids": ids}, padding=True, padding_side="left")
        return (torch.tensor(enc["input_ids"], dtype=torch.long, device=self.device),
                torch.tensor(enc["attention_mask"], dtype=torch.long, device=self.device))

    def _forward(self, tokens, mask, cache) -> torch.Tensor:
        """The next-token logits of each row after `tokens` (the cache holds what came before)."""
        return self.model(input_ids=tokens, attention_mask=mask, position_ids=self._positions(mask, tokens),
                          past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :].float()

    def _prefill(self, prompt_ids, cache) -> tuple[torch.Tensor, torch.Tensor]:
        """Fill `cache` with the prompts, each group's shared prefix computed once; returns the rows'
        next-token logits and their attention mask (padding sits left of the prefix and of the rest)."""
        groups = shared_prefix_groups(prompt_ids)
        tokens, mask = self._pad([prompt_ids[rows[0]][:length] for rows, length in groups])
        if tokens.shape[1]:  # else every prompt is a single token
            self._forward(tokens, mask, cache)
        owner = torch.tensor([g for g, (rows, _) in enumerate(groups) for _ in rows], device=self.device)
        cache.batch_select_indices(owner)  # each group's prefix, copied to its rows
        rest, rest_mask = self._pad([prompt_ids[r][length:] for rows, length in groups for r in rows])
        mask = torch.cat([mask[owner], rest_mask], dim=1)
        return self._forward(rest, mask, cache), mask

    def _generate_batch(self, prompt_ids, seeds, budgets, temperature, top_p, stop):
        sampler = SeededSampler(seeds, temperature, top_p, max(budgets), device=self.device)
        eos = torch.tensor(self.eos_ids, device=self.device)
        budget = torch.tensor(budgets, device=self.device)
        rows = torch.arange(len(prompt_ids), device=self.device)  # the batch rows still generating
        generated = [[] for _ in prompt_ids]
        cache = roomy_cache(self.model.config, room=max(budgets))
        logits, mask = self._prefill(prompt_ids, cache)
        for step in range(max(budgets)):
            if step:
                logits = self._forward(tokens, mask, cache)
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


def batch_order(prompt_ids: list[list[int]]) -> list[int]:
    """The order rows are batched in: prompts with a common prefix side by side (token order), and groups
    of them by the length each row prefills past its group's prefix, shortest first, so that a batch is
    padded to rests of similar lengths (later turns of tools and agentic conversations differ by
    hundreds of tokens). A function of the prompts alone."""
    ranked = sorted(range(len(prompt_ids)), key=lambda i: (prompt_ids[i], i))
    groups = shared_prefix_groups([prompt_ids[i] for i in ranked])
    rest = lambda i, length: len(prompt_ids[i]) - length
    groups.sort(key=lambda g: (max(rest(ranked[r], g[1]) for r in g[0]), g[0][0]))
    return [ranked[r] for rows, length in groups for r in sorted(rows, key=lambda r: (rest(ranked[r], length), r))]


def shared_prefix_groups(prompt_ids: list[list[int]]) -> list[tuple[list[int], int]]:
    """Runs of adjacent prompts prefilled through a common prefix, as (rows, prefix length): the runs that
    save the most prefill tokens (a run of k rows sharing L tokens saves (k - 1) * L). A prefix stops short
    of each prompt's last token, whose logits start the sampling. One run per problem's samples, not one
    for the whole batch: different problems share only the system prompt and tool schema."""
    def common(a, b):
        n = min(len(a), len(b))
        return next((i for i in range(n) if a[i] != b[i]), n)

    n = len(prompt_ids)
    adjacent = [common(prompt_ids[i], prompt_ids[i + 1]) for i in range(n - 1)]
    saved, start, prefix = [0] * (n + 1), [0] * (n + 1), [0] * (n + 1)
    for end in range(1, n + 1):  # the best split of rows [0, end), its last run starting at start[end]
        shared = len(prompt_ids[end - 1]) - 1
        saved[end] = -1
        for first in range(end - 1, -1, -1):
            if first < end - 1:
                shared = min(shared, adjacent[first], len(prompt_ids[first]) - 1)
            value = saved[first] + (end - 1 - first) * shared
            if value > saved[end]:
                saved[end], start[end], prefix[end] = value, first, shared
            if shared == 0:
                break  # a longer run saves nothing more
    groups, end = [], n
    while end:
        groups.append((list(range(start[end], end)), prefix[end]))
        end = start[end]
    return groups[::-1]
