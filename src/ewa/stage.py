"""`ewa stage CONFIG...`: on a node with network (a login node), download every Hugging Face model and
dataset the configs name (ewa.hub) into the cache the compute nodes read, check what the cache holds
against the hashes it is stored under, write each config with its references pinned to the commits it got,
and print what the compute nodes need to read it offline.

It is huggingface_hub's own download (snapshot_download, into the cache as the client lays it out), so
transformers, vLLM and `hf` find the same files. A run that was killed resumes: the files it completed are
in the cache and are not fetched again, the temporaries of the file it was writing are removed (unless a
live download holds them), and a connection lost mid-file resumes with a range request. A second run
downloads nothing. `--metadata-only` fetches only what `ewa plan` reads (config.json, tokenizer files, the
chat template), so a run is costed before its weights are downloaded.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ewa.errors import UserError
from ewa.hub import METADATA_FILES, HubError, HubRef, cache_dir, references

VERIFIED_FILE = "ewa-verified.json"  # beside the repository's blobs: what was hashed, by blob, size and mtime


def add_stage_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("configs", nargs="+", metavar="CONFIG",
                   help="experiment configs whose Hugging Face references to stage (a study and its controls: "
                        "configs/science.yaml configs/control-*.yaml)")
    p.add_argument("--hf-home", metavar="DIR",
                   help="the Hugging Face home to stage into, on a filesystem the compute nodes see; the cache is "
                        "DIR/hub (default: HF_HOME, or HF_HUB_CACHE, as the client reads them)")
    p.add_argument("--metadata-only", action="store_true",
                   help="only the small files `ewa plan` reads (config.json, tokenizer files, chat template), no "
                        "weights and no data: cost the run before downloading it")
    p.add_argument("--out-dir", metavar="DIR",
                   help="where the pinned configs go (default: beside each config, NAME.pinned.yaml)")
    p.add_argument("--workers", type=int, default=8, help="files downloaded at once (default: 8)")


@dataclass
class Staged:
    ref: HubRef
    keys: list[str]
    commit: str = ""
    files: int = 0
    bytes: int = 0
    fetched: int = 0
    fetched_bytes: int = 0
    hashed: int = 0
    seconds: float = 0.0


def _offline() -> str | None:
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name, "").strip().upper() in ("1", "ON", "YES", "TRUE"):
            return name
    return None


def repo_folder(cache: Path, ref: HubRef) -> Path:
    """The repository's folder in the cache (huggingface_hub's repo_folder_name)."""
    return cache / "--".join([f"{ref.kind}s", *ref.repo.split("/")])


def remove_stale_temporaries(cache: Path, storage: Path) -> int:
    """The `.incomplete` temporaries a killed download left in the repository's blobs, removed unless a live
    download holds the lock huggingface_hub takes for that blob (another user's, on a shared cache)."""
    from filelock import FileLock, Timeout

    removed = 0
    for tmp in sorted((storage / "blobs").glob("*.incomplete")) if (storage / "blobs").is_dir() else []:
        lock = cache / ".locks" / storage.name / f"{tmp.name.split('.', 1)[0]}.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        try:
            with FileLock(str(lock), timeout=0):
                tmp.unlink(missing_ok=True)
                removed += 1
        except Timeout:
            pass
    return removed


def blob_digest(path: Path, name: str) -> str | None:
    """The content's hash in the form the cache names its blob by: sha256 (a file stored with LFS or Xet) or
    git's blob sha1 (a small file); None for a name of neither form."""
    if len(name) == 64:
        h = hashlib.sha256()
    elif len(name) == 40:
        h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    else:
        return None
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def verify(folder: Path, storage: Path) -> tuple[int, int, int, list[Path]]:
    """Every file of the snapshot against the hash its blob is named by; (files, bytes, hashed now, bad
    snapshot paths). A blob hashed before, with its size and mtime unchanged, is not hashed again."""
    from ewa.io import write_json

    stamp_file = storage / VERIFIED_FILE
    try:
        stamps = json.loads(stamp_file.read_text())
    except (OSError, ValueError):
        stamps = {}
    files = size = hashed = 0
    bad = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        blob = path.resolve()
        st = blob.stat()
        files, size = files + 1, size + st.st_size
        if stamps.get(blob.name) == [st.st_size, st.st_mtime_ns]:
            continue
        digest = blob_digest(blob, blob.name)
        hashed += 1
        if digest is not None and digest != blob.name:
            bad.append(path)
            stamps.pop(blob.name, None)
        else:
            stamps[blob.name] = [st.st_size, st.st_mtime_ns]
    write_json(stamp_file, stamps)
    return files, size, hashed, bad


def download(ref: HubRef, cache: Path, metadata_only: bool, workers: int, staged: Staged) -> None:
    """The reference's files into the cache (resumed where a killed run stopped), verified; fills `staged`."""
    from huggingface_hub import snapshot_download

    storage = repo_folder(cache, ref)
    if removed := remove_stale_temporaries(cache, storage):
        print(f"ewa stage: {ref.uri()}: removed {removed} partial file(s) a killed run left", file=sys.stderr)
    blobs = storage / "blobs"
    before = {p.name: p.stat().st_size for p in blobs.iterdir()} if blobs.is_dir() else {}
    patterns = METADATA_FILES if metadata_only and ref.kind == "model" else ref.patterns
    start = time.monotonic()
    for attempt in (1, 2):
        try:
            folder = Path(snapshot_download(ref.repo, repo_type=ref.kind, revision=ref.revision, cache_dir=str(cache),
                                            allow_patterns=patterns, max_workers=workers,
                                            endpoint=os.environ.get("HF_ENDPOINT") or None))
        except Exception as e:  # the client's errors: not found, gated, revision unknown, network down
            lines = str(e).strip().splitlines() or [""]
            raise HubError(f"{', '.join(staged.keys)}: {ref.uri()}: {type(e).__name__}: {lines[0]}") from None
        files, size, hashed, bad = verify(folder, storage)
        staged.hashed += hashed
        if not bad:
            break
        if attempt == 2:
            raise HubError(f"{', '.join(staged.keys)}: {ref.uri()}: {bad[0].relative_to(folder)} does not match the "
                           f"hash it is stored under, twice: a corrupt download or cache ({bad[0].resolve()})")
        for path in bad:  # fetched again on the second pass
            print(f"ewa stage: {ref.uri()}: {path.relative_to(folder)} does not match its hash: fetching it again",
                  file=sys.stderr)
            path.resolve().unlink(missing_ok=True)
            path.unlink(missing_ok=True)
    after = {p.name: p.stat().st_size for p in blobs.iterdir() if not p.name.endswith(".incomplete")}
    new = {name: s for name, s in after.items() if before.get(name) != s}
    staged.commit, staged.files, staged.bytes = folder.name, files, size
    staged.fetched, staged.fetched_bytes = len(new), sum(new.values())
    staged.seconds = round(time.monotonic() - start, 1)


def _scalar(root, path: list[str]):
    node = root
    for part in path:
        if node is None or node.tag != "tag:yaml.org,2002:map":
            return None
        node = next((v for k, v in node.value if k.value == part), None)
    return node


def pin_text(text: str, pins: dict[str, str]) -> str:
    """The config file's text with each key's value (model.init, a data input) replaced by its pinned
    reference, everything else (comments, order, layout) as it was."""
    import yaml

    root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    edits = []
    for key, value in pins.items():
        path = (["benchmarks", key[len("benchmarks."):-len(".input")], "input"] if key.startswith("benchmarks.")
                else key.split("."))
        node = _scalar(root, path)
        if node is None or node.tag != "tag:yaml.org,2002:str":
            raise UserError(f"ewa stage: cannot find {key} as a text value in the config file to pin it")
        edits.append((node.start_mark.index, node.end_mark.index, json.dumps(value)))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def pinned_path(config: Path, out_dir: str | None) -> Path:
    name = config.name if config.stem.endswith(".pinned") else f"{config.stem}.pinned{config.suffix or '.yaml'}"
    return (Path(out_dir) if out_dir else config.parent) / name


def write_pinned(config: Path, keys: dict[str, str], out_dir: str | None) -> Path | None:
    """`config` with its references pinned, beside it (NAME.pinned.yaml) or in `out_dir`; the written file
    reads back as the same experiment the workflow plans from `config` with this cache (same sha256)."""
    import yaml

    from ewa.analysis.registry import experiment_sha256
    from ewa.config import load, validate
    from ewa.hub import replaced
    from ewa.io import write_text

    text = config.read_text()
    out = pinned_path(config, out_dir)
    body = pin_text(text, keys)
    header = "" if config.stem.endswith(".pinned") else (
        f"# {config.name} with its Hugging Face references pinned by `ewa stage` to the commits it staged:\n"
        f"# run this file on the compute nodes (staging again moves an unpinned name in {config.name}).\n")
    new = header + body
    expected = replaced(load(config), keys)
    if experiment_sha256(validate(yaml.safe_load(new))) != experiment_sha256(expected):
        raise UserError(f"ewa stage: {out}: the pinned config would not be the experiment {config} names")
    if out.is_file() and out.read_text() == new:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, new)
    return out


def stage(args: argparse.Namespace, _config: dict) -> int:
    from ewa.config import load

    if offline := _offline():
        raise UserError(f"ewa stage: {offline} is set, and staging downloads: run it on a node with network without "
                        f"it (the compute nodes keep it)")
    if args.hf_home:
        os.environ["HF_HOME"] = str(Path(args.hf_home).absolute())
        os.environ.pop("HF_HUB_CACHE", None)
        os.environ.pop("HUGGINGFACE_HUB_CACHE", None)
    cache = cache_dir()
    wanted: dict[HubRef, Staged] = {}
    per_config: dict[Path, dict[str, HubRef]] = {}
    for name in args.configs:
        path = Path(name)
        if not path.is_file():
            raise UserError(f"ewa stage: {name}: no such config file")
        refs = references(load(path))
        per_config[path] = refs
        for key, ref in refs.items():
            if args.metadata_only and ref.kind != "model":
                continue  # `ewa plan` reads no data
            wanted.setdefault(ref, Staged(ref, [])).keys.append(key)
    if not wanted:
        print(f"ewa stage: {', '.join(args.configs)} name(s) no Hugging Face repository: nothing to stage")
        return 0
    cache.mkdir(parents=True, exist_ok=True)
    for ref, staged in wanted.items():
        download(ref, cache, args.metadata_only, args.workers, staged)
        what = "metadata " if args.metadata_only and ref.kind == "model" else ""
        print(f"ewa stage: {', '.join(dict.fromkeys(staged.keys))}: {ref.uri()} at commit {staged.commit}: "
              f"{staged.files} {what}file(s), {staged.bytes / 1e9:,.2f} GB, {staged.fetched} downloaded "
              f"({staged.fetched_bytes / 1e9:,.2f} GB in {staged.seconds:g} s), {staged.hashed} hashed: verified")
    runs = []
    for path, refs in per_config.items():
        commits = {key: ref.uri(wanted[ref].commit) for key, ref in refs.items() if ref in wanted}
        if not commits:
            runs.append(path)
            continue
        runs.append(out := write_pinned(path, commits, args.out_dir))
        print(f"ewa stage: {path} pinned as {out} ({', '.join(commits)})")
    home = os.environ.get("HF_HOME")
    env = (f"HF_HOME={home}" if home and not os.environ.get("HF_HUB_CACHE") else f"HF_HUB_CACHE={cache}")
    print(f"ewa stage: the compute nodes read the cache {cache} offline with:\n"
          f"  export {env} HF_HUB_OFFLINE=1")
    if args.metadata_only:
        print(f"ewa stage: metadata only (no weights, no data): `ewa plan --configfile {runs[0]}` costs the run; "
              f"stage again without --metadata-only before `snakemake` plans it")
    return 0


COMMANDS = {"stage": (add_stage_arguments, stage)}
