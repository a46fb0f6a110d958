"""Sampling a model on a benchmark in one inference setting (reasoning, tools, agentic).

Backends (hf, vllm) turn prompts into completions; settings drive the conversation around them;
`ewa.sample.run` writes one resumable JSONL record per sample.
"""
