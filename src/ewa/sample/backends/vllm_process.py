"""One vLLM engine in its own process (vllm_engine_worker.py, beside this file), spoken to in JSON lines: its own
log file, and a reply that fails raises with that log's tail."""
from __future__ import annotations

import collections
import json
import subprocess
from pathlib import Path

WORKER = Path(__file__).with_name("vllm_engine_worker.py")
LOG_TAIL = 15  # lines of a failed worker's log in the error


class WorkerProcess:
    def __init__(self, python: str, model_dir: str, engine_args: dict, env: dict, log_path: Path,
                 cpus: tuple[int, ...] = (), name: str = "vllm worker"):
        self.name, self.log_path = name, Path(log_path)
        self._log = open(self.log_path, "w")
        command = [python, "-u", str(WORKER), "--model", str(model_dir), "--engine-args", json.dumps(engine_args)]
        if cpus:
            command += ["--cpus", ",".join(map(str, cpus))]
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     text=True, env=env)

    def send(self, request: dict) -> None:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()

    def read(self) -> dict:
        """The next reply (the first is the ready line); raises when the worker died or answered an error."""
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            raise RuntimeError(f"{self.name} exited with code {code}; log {self.log_path}:\n{self.tail()}")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{self.name}: {reply['error']}; log {self.log_path}:\n{self.tail()}")
        return reply

    def tail(self) -> str:
        self._log.flush()
        with open(self.log_path, errors="replace") as f:
            return "".join(collections.deque(f, maxlen=LOG_TAIL))

    def end_requests(self) -> None:
        """EOF on stdin: the worker shuts vLLM down and exits (closing stdout too unblocks a worker
        still writing a reply nobody will read)."""
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:  # a worker already gone leaves a broken pipe
                pass

    def wait(self, timeout: float = 120) -> None:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
