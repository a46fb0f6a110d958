"""The program inside a completion: its last fenced Python block (shared by sampling and evaluation)."""
from __future__ import annotations

import re

FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
PYTHON_TAGS = {"python", "python3", "py", "py3"}
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def strip_reasoning(completion: str) -> str:
    """The answer without its reasoning block: drafts inside `<think>` are never the submission.

    Templates that open the block in the prompt (DeepSeek-R1) leave only `</think>` in the
    completion; a block cut off by the budget has no close, and then nothing after it is an answer.

    >>> strip_reasoning("<think>draft</think>final")
    'final'
    >>> strip_reasoning("draft</think>final"), strip_reasoning("answer<think>cut off")
    ('final', 'answer')
    """
    if THINK_CLOSE in completion:
        return completion[completion.rfind(THINK_CLOSE) + len(THINK_CLOSE):]
    if THINK_OPEN in completion:
        return completion[:completion.find(THINK_OPEN)]
    return completion


def extract_code(completion: str) -> str | None:
    """The last ```python block (else the last untagged ``` block) outside any reasoning block; None if
    there is none.

    >>> extract_code("try\\n```python\\nprint(1)\\n```\\nthen\\n```python\\nprint(2)\\n```")
    'print(2)\\n'
    """
    blocks = FENCE.findall(strip_reasoning(completion))
    for wanted in (lambda tag: tag.lower() in PYTHON_TAGS, lambda tag: tag == ""):
        chosen = [body for tag, body in blocks if wanted(tag)]
        if chosen:
            return chosen[-1]
    return None
