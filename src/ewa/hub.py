"""Models and data named by their Hugging Face Hub repositories, read from the local Hugging Face cache only:
never the network (`ewa stage` on a login node downloads them, ewa.stage).

How a config names them (config.schema.yaml says the same):

- `model.init`: `hf://OWNER/NAME[@REVISION]`, or plain `OWNER/NAME[@REVISION]` when no local path of that
  name exists (an existing local path always wins, so a relative directory `models/x` stays a directory);
- a data `input`: `hf://datasets/OWNER/NAME[@REVISION][/PATH]`, huggingface_hub's own hf:// spelling; PATH
  is a file, a directory or a glob inside the repository (none: the whole repository).

REVISION is a branch, a tag or a commit (a `/` in it written %2F, as in hf:// URIs); none means `main`.
Resolving a reference reads the cache as huggingface_hub lays it out (`refs/<revision>` names the commit,
`snapshots/<commit>/` holds the files) with `local_files_only`, so a missing or partial one is one line that
says how to stage it. The commit it resolves to is the reference's pinned form, `hf://OWNER/NAME@<commit>`:
what the workflow puts in the experiment's config, hence in its sha256 and in every job's slice, so a run on
another revision is another run. A config that names only local paths has no reference, and nothing here
changes it (nor its experiment hash).

>>> parse("hf://Qwen/Qwen2.5-Coder-7B-Instruct", "model.init").uri("0" * 40)
'hf://Qwen/Qwen2.5-Coder-7B-Instruct@0000000000000000000000000000000000000000'
>>> parse("hf://datasets/mylab/code_tasks@v6/test6.jsonl", "train_data.input")
HubRef(kind='dataset', repo='mylab/code_tasks', revision='v6', path='test6.jsonl')
>>> parse("tiny", "model.init") is None, parse("/models/Qwen2.5-Coder-7B-Instruct", "model.init") is None
(True, True)
"""
from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

from ewa.errors import UserError

SCHEME = "hf://"
# A repository id as the Hub allows it: OWNER/NAME of word characters, '-' and '.', no '--' or '..'.
REPO_PART = r"[A-Za-z0-9](?:[\w.-]*[A-Za-z0-9_])?"
PLAIN_MODEL = re.compile(rf"({REPO_PART}/{REPO_PART})(?:@([^\s@/]+))?")
COMMIT = re.compile(r"[0-9a-f]{40}")
# Revisions that hold a '/' and are written as they are in hf:// URIs (huggingface_hub's special refs).
SPECIAL_REF = re.compile(r"refs/(?:pr/\d+|convert/[\w.-]+)")
# What `ewa plan` and the planning checks read of a model (its architecture, tokenizer and chat template):
# all that `ewa stage --metadata-only` fetches.
METADATA_FILES = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                  "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt", "tokenizer.model",
                  "chat_template.jinja", "chat_template.json", "*.safetensors.index.json"]
# A model's weights: one file, or an index naming its shards (the index alone is metadata: a 7B's).
WEIGHTS = (("model.safetensors", "model.safetensors.index.json"), ("pytorch_model.bin", "pytorch_model.bin.index.json"))
STAGE = "ewa stage {configfile}"


def has_weights(folder: Path) -> bool:
    """Whether a model's weights are all in `folder`: its single weights file, or every shard its index names."""
    for single, index in WEIGHTS:
        if (folder / single).is_file():
            return True
        if (folder / index).is_file():
            try:
                shards = set(json.loads((folder / index).read_text())["weight_map"].values())
            except (ValueError, KeyError, TypeError, AttributeError):
                return False
            return bool(shards) and all((folder / shard).is_file() for shard in shards)
    return False


class HubError(UserError):
    """A hub reference that is malformed, or not (wholly) in the local Hugging Face cache."""


@dataclass(frozen=True)
class HubRef:
    kind: str  # "model" | "dataset": huggingface_hub's repo_type
    repo: str  # OWNER/NAME
    revision: str | None  # as written; None: the default branch
    path: str = ""  # inside the repository (datasets only); "" for all of it
    plain: bool = field(default=False, compare=False, repr=False)  # written OWNER/NAME, no hf://: maybe a path

    def uri(self, revision: str | None = None) -> str:
        """The hf:// form; with `revision` (a commit), the pinned reference."""
        rev = revision or self.revision
        if rev and not SPECIAL_REF.fullmatch(rev):
            rev = quote(rev, safe="")
        prefix = "datasets/" if self.kind == "dataset" else ""
        return f"{SCHEME}{prefix}{self.repo}" + (f"@{rev}" if rev else "") + (f"/{self.path}" if self.path else "")

    @property
    def patterns(self) -> list[str] | None:
        """The files of the repository this reference reads (huggingface_hub's allow_patterns, fnmatch: `*`
        crosses '/'); None: all of them."""
        return [self.path, f"{self.path}/*"] if self.path else None


@dataclass(frozen=True)
class Resolved:
    key: str  # the config key that names it
    ref: HubRef
    commit: str
    local: str  # the snapshot directory, or the path inside it the reference names
    cache: str

    @property
    def pinned(self) -> str:
        return self.ref.uri(self.commit)

    def record(self) -> dict:
        """What a provenance record keeps of it."""
        return {"ref": self.pinned, "repo": self.ref.repo, "type": self.ref.kind, "revision": self.commit,
                "requested": self.ref.revision or "main", "path": self.ref.path or None, "local": self.local}


def _malformed(key: str, value: str, why: str) -> HubError:
    spelling = ("hf://datasets/OWNER/NAME[@REVISION][/PATH]" if key != "model.init"
                else "hf://OWNER/NAME[@REVISION] (or OWNER/NAME[@REVISION])")
    return HubError(f"config: key '{key}': {value}: {why} (a Hugging Face reference is {spelling})")


def parse(value, key: str) -> HubRef | None:
    """The hub reference `value` (the config's `key`) names, or None for a local path ('tiny' included)."""
    if not isinstance(value, str):
        return None
    if value.startswith(SCHEME):
        return _parse_uri(value, key)
    if key != "model.init" or value == "tiny" or os.path.exists(value) or value.startswith((".", "/", "~")):
        return None
    match = PLAIN_MODEL.fullmatch(value)
    if not match or "--" in match[1] or ".." in match[1]:
        return None  # a local path that is not there: the workflow's own check names it
    return HubRef("model", match[1], _revision(match[2], key, value), plain=True)


def _revision(raw: str | None, key: str, value: str) -> str | None:
    if raw is None:
        return None
    revision = unquote(raw)
    if not revision:
        raise _malformed(key, value, "empty revision after '@'")
    return revision


def _parse_uri(value: str, key: str) -> HubRef:
    body = value[len(SCHEME):]
    kind = "model"
    for prefix, named in (("datasets/", "dataset"), ("models/", "model")):
        if body.startswith(prefix):
            kind, body = named, body[len(prefix):]
            break
    else:
        if body.split("/", 1)[0] in ("spaces", "buckets", "kernels"):
            raise _malformed(key, value, "only model and dataset repositories are read")
    parts = body.split("/", 2)
    if len(parts) < 2:
        raise _malformed(key, value, "no OWNER/NAME")
    owner, name_rev, rest = parts[0], parts[1], parts[2] if len(parts) > 2 else ""
    name, at, raw = name_rev.partition("@")
    if at and raw == "refs" and (special := SPECIAL_REF.match(f"refs/{rest}")):  # hf://o/n@refs/pr/1/path
        raw, rest = special[0], rest[len(special[0]) - len("refs/"):].lstrip("/")
    repo = f"{owner}/{name}"
    if not re.fullmatch(f"{REPO_PART}/{REPO_PART}", repo) or "--" in repo or ".." in repo:
        raise _malformed(key, value, f"{repo!r} is no repository id")
    revision = _revision(raw, key, value) if at else None
    path = rest.strip("/")
    if kind == "model" and key != "model.init":
        raise _malformed(key, value, "a data input names a dataset repository")
    if kind == "dataset" and key == "model.init":
        raise _malformed(key, value, "model.init names a model repository, not a dataset")
    if kind == "model" and path:
        raise _malformed(key, value, "a model is a whole repository: no path after it")
    if ".." in path.split("/"):
        raise _malformed(key, value, "'..' in the path")
    return HubRef(kind, repo, revision, path)


def references(config: dict) -> dict[str, HubRef]:
    """The hub references of a validated experiment config (or slice), by config key."""
    found = {}
    if (ref := parse((config.get("model") or {}).get("init"), "model.init")) is not None:
        found["model.init"] = ref
    datasets = {"train_data": config.get("train_data") or {}}
    datasets.update({f"benchmarks.{name}": spec for name, spec in (config.get("benchmarks") or {}).items()})
    for key, spec in datasets.items():
        if (ref := parse(spec.get("input"), f"{key}.input")) is not None:
            found[f"{key}.input"] = ref
    return found


def set_value(config: dict, key: str, value: str) -> None:
    """Set the config's `key` (model.init, train_data.input, benchmarks.NAME.input) in place."""
    if key.startswith("benchmarks."):  # a benchmark's name may hold a dot
        config["benchmarks"][key[len("benchmarks."):-len(".input")]]["input"] = value
    else:
        section, name = key.split(".")
        config[section][name] = value


def cache_dir() -> Path:
    """The hub cache this process reads, as huggingface_hub computes it (HF_HUB_CACHE, else HF_HOME/hub, else
    ~/.cache/huggingface/hub), from the environment now: huggingface_hub reads it once, when imported."""
    home = os.getenv("HF_HOME") or os.path.join(os.getenv("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                                                 "huggingface")
    cache = os.getenv("HF_HUB_CACHE") or os.getenv("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    return Path(os.path.expandvars(os.path.expanduser(cache)))


def stage_command(configfile: str | None) -> str:
    return STAGE.format(configfile=configfile or "CONFIG")


def resolve(ref: HubRef, key: str, *, metadata_only: bool = False, configfile: str | None = None,
            cache: Path | None = None) -> Resolved:
    """`ref` from the local cache, never the network: its commit and local path. metadata_only: a model's
    config.json and tokenizer files are enough (what `ewa plan` reads). A reference that is not there, or only
    in part, is one HubError line naming `key` and the command that stages it."""
    from huggingface_hub import snapshot_download
    from huggingface_hub import errors as hub_errors

    cache = cache or cache_dir()
    text = ref.uri()
    stage = f"stage it on a node with network (a login node): {stage_command(configfile)}"
    where = f"the Hugging Face cache {cache}" + ("" if os.getenv("HF_HOME") or os.getenv("HF_HUB_CACHE") else
                                                   " (HF_HOME unset: the default)")
    patterns = METADATA_FILES if metadata_only and ref.kind == "model" else ref.patterns
    incomplete = getattr(hub_errors, "IncompleteSnapshotError", ())
    try:
        folder = Path(snapshot_download(ref.repo, repo_type=ref.kind, revision=ref.revision, cache_dir=str(cache),
                                        local_files_only=True, allow_patterns=patterns))
    except incomplete as e:  # the cached listing names files the snapshot lacks
        snapshot = Path(getattr(e, "snapshot_path", None) or ".")
        if ref.kind == "model" and not has_weights(snapshot):
            raise HubError(f"config: key '{key}': {text}: only its metadata is in {where} (no weights: staged with "
                           f"--metadata-only?); {stage}") from None
        missing = re.search(r"(\d+) file\(s\) are missing \(([^,)]+)", str(e))
        what = f" ({missing[1]} files missing, e.g. {missing[2]})" if missing else ""
        raise HubError(f"config: key '{key}': {text}: only part of it is in {where}{what}; {stage}") from None
    except (hub_errors.LocalEntryNotFoundError, OSError, ValueError):
        rev = f" at revision {ref.revision}" if ref.revision else ""
        local = f"no local directory {ref.uri()[len(SCHEME):]} either, and " if ref.plain else ""
        raise HubError(f"config: key '{key}': {text}: {local}not in {where}{rev}; {stage}") from None
    commit = folder.name
    if not COMMIT.fullmatch(commit):
        raise HubError(f"config: key '{key}': {text}: {folder} is not a snapshot of the Hugging Face cache")
    local = folder / ref.path if ref.path else folder
    if ref.kind == "model":
        if not (folder / "config.json").is_file():
            raise HubError(f"config: key '{key}': {text}: its snapshot {commit[:12]} in {where} has no config.json; "
                           f"{stage}")
        if not metadata_only and not has_weights(folder):
            raise HubError(f"config: key '{key}': {text}: only its metadata is in {where} (no weights: staged with "
                           f"--metadata-only?); {stage}")
    elif not (local.exists() or (glob.has_magic(str(local)) and glob.glob(str(local)))):
        raise HubError(f"config: key '{key}': {text}: the snapshot {commit[:12]} in {where} has no {ref.path}; {stage}")
    return Resolved(key, ref, commit, str(local), str(cache))


def resolve_config(config: dict, *, configfile: str | None = None, metadata_only: bool = False,
                   data: bool = True) -> dict[str, Resolved]:
    """Every hub reference of `config` resolved from the cache, by key (empty for a config of local paths).
    metadata_only: the model's metadata is enough; data: resolve the data inputs too (`ewa plan` reads none)."""
    return {key: resolve(ref, key, metadata_only=metadata_only and key == "model.init", configfile=configfile)
            for key, ref in references(config).items() if data or key == "model.init"}


def replaced(config: dict, values: dict[str, str]) -> dict:
    """`config` with the value at each dotted key of `values` replaced (a copy; `config` itself if none)."""
    if not values:
        return config
    import copy

    out = copy.deepcopy(config)
    for key, value in values.items():
        set_value(out, key, value)
    return out


def pinned(config: dict, resolved: dict[str, Resolved]) -> dict:
    """`config` with each resolved reference at its commit (hf://OWNER/NAME@<commit>): what the experiment's
    sha256 and the jobs' slices hold. A config without references comes back equal, so its hash is unchanged."""
    return replaced(config, {key: r.pinned for key, r in resolved.items()})


def localized(config: dict, resolved: dict[str, Resolved]) -> dict:
    """`config` with each resolved reference replaced by its local path in the cache: what reads the files."""
    return replaced(config, {key: r.local for key, r in resolved.items()})


# The references this process resolved for a stage, by key: every provenance record it writes names their
# commits (ewa.io.provenance). Reset each time a stage reads its config (localize_inputs).
_RESOLVED: dict[str, dict] = {}


def note(resolved: Resolved) -> None:
    _RESOLVED[resolved.key] = resolved.record()


def resolved_here() -> dict[str, dict]:
    return dict(_RESOLVED)


def localize_inputs(config: dict) -> dict:
    """A stage's config slice with each data input that names the hub replaced by its local path in the
    cache, so the loaders (ewa.data) read local files only; the references and their commits go into the
    stage's provenance. `model.init` stays as it is: `ewa init` resolves it (ewa.init.build), and its record
    keeps the reference the experiment names."""
    _RESOLVED.clear()
    resolved = {key: resolve(ref, key) for key, ref in references(config).items() if key != "model.init"}
    for r in resolved.values():
        note(r)
    return localized(config, resolved)


def local_model(init: str) -> tuple[str, Resolved | None]:
    """model.init as a local directory: itself, or its snapshot in the cache (with the resolution)."""
    ref = parse(init, "model.init")
    if ref is None:
        return init, None
    resolved = resolve(ref, "model.init")
    return resolved.local, resolved
