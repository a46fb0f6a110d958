"""A vLLM worker: loads a model once, then answers generation requests given as JSON.

Imports nothing from ewa, so it runs in vLLM's own venv (.venv-vllm, or vllm's env on a GPU node):
  python vllm_engine_worker.py --model DIR --engine-args JSON                   JSON lines on stdin/stdout
  python vllm_engine_worker.py --model DIR --requests in.jsonl --results out.jsonl   a file of requests
  --cpus 0,1 pins the worker to those cores (a data-parallel engine's share of a CPU-only machine).
When vllm is importable in the caller's env, `Engine` is used in-process instead.

Request: {"prompts": [[token id, ...], ...], "params": [{"seed", "max_tokens", "temperature", "top_p",
          "stop": [str], "stop_token_ids": [int]}, ...]}            (one params object per prompt)
Reply:   {"completions": [{"text", "token_count", "finish_reason": "stop"|"length"}, ...]} or {"error": str}
The first line a serving worker writes is {"ready": true, "max_model_len": int, "vllm": version}.
"""
import argparse
import json
import os
import sys

if __name__ == "__main__":
    # Run as a script, this file's directory leads sys.path, and its neighbour vllm.py would shadow vllm
    # (vLLM's engine processes inherit the cleaned path).
    _here = os.path.dirname(os.path.realpath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != _here]


class Engine:
    def __init__(self, model: str, engine_args: dict):
        from vllm import LLM

        self.llm = LLM(model=model, tokenizer=model, **engine_args)
        self.max_model_len = self.llm.llm_engine.model_config.max_model_len

    def generate(self, request: dict) -> list[dict]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = [SamplingParams(
            n=1, seed=p["seed"], max_tokens=p["max_tokens"], temperature=p["temperature"],
            top_p=p["top_p"] if p["temperature"] > 0 else 1.0, stop=p.get("stop") or None,
            stop_token_ids=p.get("stop_token_ids") or None, include_stop_str_in_output=True,
            skip_special_tokens=True,
        ) for p in request["params"]]
        prompts = [TokensPrompt(prompt_token_ids=ids) for ids in request["prompts"]]
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        return [{"text": o.outputs[0].text, "token_count": len(o.outputs[0].token_ids),
                 "finish_reason": "length" if o.outputs[0].finish_reason == "length" else "stop"} for o in outs]


def answer(engine: Engine, line: str) -> dict:
    try:
        return {"completions": engine.generate(json.loads(line))}
    except Exception as e:  # reported to the caller, which raises it
        return {"error": f"{type(e).__name__}: {e}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--engine-args", default="{}", help="JSON keyword arguments of vllm.LLM")
    ap.add_argument("--requests", help="a JSONL file of requests (file mode)")
    ap.add_argument("--results", help="where file mode writes one reply per request")
    ap.add_argument("--cpus", help="comma-separated core ids this worker runs on (default: the caller's)")
    args = ap.parse_args()
    if args.cpus:  # before torch starts its OpenMP threads, which inherit the mask
        os.sched_setaffinity(0, [int(c) for c in args.cpus.split(",")])
    # Replies own the real stdout; anything a library prints goes to stderr instead.
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    engine = Engine(args.model, json.loads(args.engine_args))
    if args.requests:
        with open(args.requests) as src, open(args.results, "w") as dst:
            for line in src:
                if line.strip():
                    dst.write(json.dumps(answer(engine, line)) + "\n")
        return 0
    import vllm

    replies.write(json.dumps({"ready": True, "max_model_len": engine.max_model_len, "vllm": vllm.__version__}) + "\n")
    for line in sys.stdin:
        if line.strip():
            replies.write(json.dumps(answer(engine, line)) + "\n")
    return 0


if __name__ == "__main__":  # vLLM starts engine processes that re-import the main module
    sys.exit(main())
