"""The program inside a completion: its last fenced Python block (shared by sampling and evaluation)."""
from __future__ import annotations

import re

FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
PYTHON_TAGS = {"python", "python3", "py", "py3"}


def extract_code(completion: str) -> str | None:
    """The last ```python block (else the last untagged ``` block); None if there is none.

    >>> extract_code("try\\n```python\\nprint(1)\\n```\\nthen\\n```python\\nprint(2)\\n```")
    'print(2)\\n'
    """
    blocks = FENCE.findall(completion)
    for wanted in (lambda tag: tag.lower() in PYTHON_TAGS, lambda tag: tag == ""):
        chosen = [body for tag, body in blocks if wanted(tag)]
        if chosen:
            return chosen[-1]
    return None
