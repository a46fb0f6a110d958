"""Messages -> the text a model continues: the tokenizer's chat template, or a plain-text fallback."""
from __future__ import annotations

from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
# End-of-turn tokens of the chat formats the field uses; a completion ends at any of them.
END_OF_TURN = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>")


def load_tokenizer(model_dir: str):
    """The model's own tokenizer; a directory without one is a user error naming it."""
    from transformers import AutoTokenizer

    path = Path(model_dir)
    if not path.is_dir():
        raise ValueError(f"--model {model_dir}: not a directory")
    if not (path / "config.json").is_file():
        raise ValueError(f"--model {model_dir}: no config.json (not a Hugging Face model directory)")
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        raise ValueError(f"--model {model_dir}: no tokenizer (expected one of {', '.join(TOKENIZER_FILES)})")
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def render(tokenizer, messages: list[dict], add_generation_prompt: bool = True) -> str:
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
    # A base model without a template: label turns in plain text.
    text = "".join(f"{m['role'].capitalize()}: {m['content']}\n\n" for m in messages)
    return text + ("Assistant: " if add_generation_prompt else "")


def stop_token_ids(tokenizer, model_eos=None) -> list[int]:
    """Token ids that end an assistant turn: the model's eos ids plus known end-of-turn tokens."""
    ids = set()
    for eos in (model_eos, tokenizer.eos_token_id):
        if eos is not None:
            ids.update(eos if isinstance(eos, (list, tuple)) else [eos])
    vocab = tokenizer.get_vocab()
    ids.update(vocab[t] for t in END_OF_TURN if t in vocab and t in tokenizer.all_special_tokens)
    return sorted(ids)
