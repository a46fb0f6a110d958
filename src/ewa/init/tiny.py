"""The tiny Qwen2 the CPU miniature trains: a byte-level BPE tokenizer and a few-million-parameter causal LM,
both built offline and deterministically from a seed.
"""
from __future__ import annotations

import json
from typing import Iterable

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen2Tokenizer

# transformers 5.x (and vLLM) rebuild a Qwen2Tokenizer for any qwen2 model, replacing whatever
# pre-tokenizer was saved with Qwen's split regex + NFC: the tiny tokenizer is trained with exactly
# that pipeline so token ids agree in every tool.
from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX
from trl.chat_template_utils import qwen2_5_chat_template

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END)  # ids 0, 1, 2
# Qwen2.5 adds its tool-call tags as ordinary (not special) tokens, so decoding keeps them.
TOOL_CALL_TOKENS = ("<tool_call>", "</tool_call>")

# Qwen2.5-Instruct's own chat template, byte for byte as TRL ships it: the tiny model renders prompts,
# tools and tool calls exactly as Qwen2.5-Coder does, and TRL's response parser recognises it.
CHAT_TEMPLATE = qwen2_5_chat_template

def qwen2_pipeline(tokenizer: Tokenizer) -> Tokenizer:
    """Give `tokenizer` the normalizer, pre-tokenizer and decoder transformers' Qwen2Tokenizer uses."""
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Qwen2Tokenizer:
    """Train byte-level BPE on `texts` (order matters; the result is deterministic for a given list)."""
    bpe = qwen2_pipeline(Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False)))
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(list(texts), trainer=trainer)
    state = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in state["merges"]]
    tokenizer = Qwen2Tokenizer(
        vocab=state["vocab"], merges=merges,
        unk_token=ENDOFTEXT, bos_token=None, eos_token=IM_END, pad_token=ENDOFTEXT,
    )
    tokenizer.add_special_tokens({"additional_special_tokens": [IM_START]})
    tokenizer.add_tokens(list(TOOL_CALL_TOKENS) + chat_format_tokens())
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def chat_format_tokens() -> list[str]:
    """The fixed strings of the chat format, each one added token of the tiny vocabulary.

    The rendered text stays byte-identical (added tokens only change how it splits into ids), but a
    few-million-parameter model is spared reading and writing boilerplate piece by piece:
    - what it reads: the system prompt, the tools setting's whole system prompt, the template's tools
      block (in every tools prompt and SFT row), the stdin instruction;
    - what it writes: the frame of a python call (`<tool_call>\\n{"name": "python", "arguments":
      {"code": "`, then `", "stdin": "`, then the closing braces and tag), and the JSON escapes of a
      newline and a quote. Isolated, `\\n` does not fuse with the next word, so a program inside a
      call's JSON string splits like the same program in a code block.
    A real model's tokenizer is its own; nothing here reaches it.
    """
    import json

    from transformers.utils.chat_template_utils import render_jinja_template

    from ewa.chat import PYTHON_TOOL
    from ewa.prompts import IO_INSTRUCTIONS, SYSTEM_PROMPT, TOOLS_SYSTEM, with_system

    def rendered(messages, tools=None):
        return render_jinja_template(conversations=[messages], tools=tools, chat_template=CHAT_TEMPLATE)[0][0]

    # The tools setting's whole system prompt is one token, so a tiny model sees at a glance that it may
    # call a tool; the agentic addition stays ordinary text, so an agentic first turn reads like reasoning.
    system = [{"role": "system", "content": SYSTEM_PROMPT}]
    systems = [SYSTEM_PROMPT, with_system(system, TOOLS_SYSTEM)[0]["content"]]
    opening = rendered(system, [PYTHON_TOOL])
    tools_block = opening[opening.index(SYSTEM_PROMPT) + len(SYSTEM_PROMPT):opening.index(IM_END)]
    call = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": PYTHON_TOOL["function"]["name"], "arguments": {"code": "CODE", "stdin": "STDIN"}}}]}
    text = rendered([call])
    text = text[text.index(TOOL_CALL_TOKENS[0]):text.rindex(TOOL_CALL_TOKENS[1]) + len(TOOL_CALL_TOKENS[1])]
    head, rest = text.split("CODE", 1)
    middle, tail = rest.split("STDIN", 1)
    escapes = [json.dumps(c)[1:-1] for c in ("\n", '"')]
    return [*systems, tools_block, IO_INSTRUCTIONS["stdin"], head, middle, tail, *escapes]


def build_tiny_model(tokenizer: Qwen2Tokenizer, settings: dict, seed: int) -> Qwen2ForCausalLM:
    """A randomly initialised tiny Qwen2 whose vocabulary is exactly the tokenizer's; `settings`: the
    validated `model.tiny` section."""
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=settings["hidden_size"],
        intermediate_size=settings["intermediate_size"],
        num_hidden_layers=settings["num_layers"],
        num_attention_heads=settings["num_heads"],
        num_key_value_heads=settings["num_kv_heads"],
        max_position_embeddings=settings["max_position_embeddings"],
        tie_word_embeddings=True,
        bos_token_id=tokenizer.convert_tokens_to_ids(ENDOFTEXT),
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.convert_tokens_to_ids(ENDOFTEXT),
        dtype="float32",
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = [config.eos_token_id, config.pad_token_id]
    model.generation_config.pad_token_id = config.pad_token_id
    return model


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
