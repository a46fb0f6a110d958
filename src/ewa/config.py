"""The experiment config: validated against config.schema.yaml (shipped inside the package), which is
the only place a default is written. Every stage gets its validated slice of the config the same way:
`ewa COMMAND --config JSON_OR_FILE`, read here by `from_arg` in ewa.cli and nowhere below it: the stages
take the validated sections as they are.

A wrong key or value stops the run with one line naming the key and what was expected.

>>> section("grpo")["max_steps"], section("sample", {"n": 4})["n"], section("sample")["temperature"]
(40, 4, 0.8)
"""
from __future__ import annotations

import copy
import functools
import json
import os
from importlib import resources
from pathlib import Path

import jsonschema
import yaml

from ewa.alphas import alpha_tag
from ewa.families import check_families
from ewa.tiers import TierError, check_regimes
from ewa.errors import ConfigError

SCHEMA_FILE = "config.schema.yaml"


def _with_defaults(validator_class):
    """A validator that fills each missing property's default before descending into it."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


@functools.lru_cache(maxsize=None)
def _packaged_schema() -> dict:
    # libyaml's loader when PyYAML has it: the same dict ~10x faster, which every `ewa` job pays at start
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(resources.files("ewa").joinpath(SCHEMA_FILE).read_text(), Loader=loader)


def _key(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _numeric_text(value) -> bool:
    """A number or a boolean as text: quoted in YAML, or '10' from `snakemake --config grpo='{max_steps: 10}'`."""
    if not isinstance(value, str):
        return False
    try:
        float(value)
        return True
    except ValueError:
        return value.lower() in ("true", "false")


def _describe(error: jsonschema.ValidationError) -> str:
    key = _key(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        where = f"{key}." if error.absolute_path else ""
        return f"unknown key '{where}{extra[0]}' (expected one of: {', '.join(allowed)})"
    if error.validator == "enum":
        return f"key '{key}': expected one of {error.validator_value}, got {error.instance!r}"
    if error.validator == "type":
        hint = " (given as text: unquote it in YAML; snakemake's --config passes nested values as text, so use a --configfile)" \
            if _numeric_text(error.instance) else ""
        return f"key '{key}': expected {error.validator_value}, got {error.instance!r}{hint}"
    if error.validator == "required":  # the schema's `message` says why the key cannot be left out
        missing = next(k for k in error.validator_value if k not in error.instance)
        return f"key '{key}.{missing}': {error.schema.get('message', 'required')}"
    if error.validator == "not" and "message" in error.schema:  # the schema says what it rules out
        return f"key '{key}': {error.schema['message']}, got {error.instance!r}"
    if error.validator == "oneOf" and "regimes" in key:
        return f"key '{key}': give exactly one of 'fraction' or 'max_size'"
    return f"key '{key}': {error.message}"


def validate(config: dict, schema: dict | None = None, partial: bool = False) -> dict:
    """Return a validated copy of `config` with every default filled in; raise ConfigError otherwise.

    partial: `config` is a slice of an experiment (what one stage reads). The regimes' own rules (nested,
    unique names) still apply, so a direct command refuses the regimes the workflow refuses; rules that
    relate several sections are checked by the workflow on the whole config.
    """
    schema = schema or _packaged_schema()
    config = copy.deepcopy(config if config is not None else {})
    validator = _with_defaults(jsonschema.Draft202012Validator)(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), str(e.absolute_path)))
    if errors:
        raise ConfigError(f"config: {_describe(jsonschema.exceptions.best_match(errors))}")
    _check_consistency(config, partial)
    return config


def section(name: str, value: dict | None = None) -> dict:
    """One validated section with its defaults filled, e.g. section("grpo", {"max_steps": 20})."""
    return validate({name: value} if value is not None else {}, partial=True)[name]


def _check_datasets(config: dict) -> None:
    """Each dataset entry's format is a known one, and its keys beyond the shared ones are that format's own
    (ewa.formats.Format.options), valid under the format's schema, defaults filled in."""
    from ewa import formats

    shared = _packaged_schema()["$defs"]["dataset"]["properties"]
    entries = [("train_data", config["train_data"])] if "train_data" in config else []
    entries += [(f"benchmarks.{name}", entry) for name, entry in (config.get("benchmarks") or {}).items()]
    for where, entry in entries:
        if not isinstance(entry, dict):
            continue  # the schema has said so
        fmt = formats.dataset_format(entry, where)
        if fmt.splits is not None and entry.get("split", "all") not in fmt.splits:
            raise ConfigError(f"config: key '{where}.split': format {fmt.name} has the splits {', '.join(fmt.splits)}, "
                              f"got {entry['split']!r}")
        own = {k: v for k, v in entry.items() if k not in shared}
        unknown = sorted(set(own) - set(fmt.options))
        if unknown:
            raise ConfigError(f"config: unknown key '{where}.{unknown[0]}' (expected one of: "
                              f"{', '.join(sorted(set(shared) | set(fmt.options)))}; format {fmt.name} takes "
                              f"{', '.join(sorted(fmt.options)) or 'no keys of its own'})")
        schema = {"type": "object", "properties": fmt.options}
        validator = _with_defaults(jsonschema.Draft202012Validator)(
            schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        errors = sorted(validator.iter_errors(own), key=lambda e: str(e.absolute_path))
        if errors:
            error = jsonschema.exceptions.best_match(errors)
            error.path.appendleft(where)
            raise ConfigError(f"config: {_describe(error)}")
        entry.update(own)


def _check_consistency(config: dict, partial: bool = False) -> None:
    """Cross-key rules a JSON schema cannot say; of a slice (partial), only those within one section
    (the regimes, model.tiny, each dataset's format)."""
    _check_datasets(config)
    try:
        check_regimes(config["regimes"])
    except TierError as e:
        raise ConfigError(f"config: key {e}") from None
    tiny = config["model"]["tiny"]
    if config["model"]["init"] == "tiny" and (tiny["hidden_size"] % tiny["num_heads"]
                                              or tiny["num_heads"] % tiny["num_kv_heads"]):
        raise ConfigError("config: key 'model.tiny': hidden_size must divide by num_heads and num_heads "
                          "by num_kv_heads")
    if partial:
        return
    names = [r["name"] for r in config["regimes"]]
    if len(names) < 2:  # a job's slice may hold one regime; an experiment compares at least two
        raise ConfigError(f"config: key 'regimes': an experiment needs at least two regimes, got {names}")
    for end in ("low", "high"):
        if config["merge"][end] not in names:
            raise ConfigError(f"config: key 'merge.{end}': regime {config['merge'][end]!r} is not one of {names}")
    if names.index(config["merge"]["low"]) >= names.index(config["merge"]["high"]):
        raise ConfigError("config: key 'merge.low' must name a lower-coverage regime than 'merge.high'")
    n = config["sample"]["n"]
    for k in config["evaluate"]["k"]:
        if k > n:
            raise ConfigError(f"config: key 'evaluate.k': pass@{k} needs at least {k} samples, but sample.n is {n}")
    if config["evaluate"]["budget"] > n:
        raise ConfigError(f"config: key 'evaluate.budget': {config['evaluate']['budget']} exceeds sample.n ({n})")
    try:
        tags = [alpha_tag(a) for a in config["merge"]["alphas"]]
    except ValueError as e:
        raise ConfigError(f"config: key 'merge.alphas': {e}") from None
    if len(set(tags)) != len(tags):
        raise ConfigError(f"config: key 'merge.alphas': duplicate alphas {config['merge']['alphas']}")
    check_families(config)
    tuned = sorted(set(config["science"]["seeds"]) & set(config["science"]["design_seeds"]))
    if tuned:
        raise ConfigError(f"config: key 'science.seeds': seed(s) {tuned} also tuned the design (science.design_seeds); "
                          "report only seeds the design never saw")
    _check_shared_init(config["science"])
    if config["sandbox"].get("calibration") and not config["sandbox"]["calibrate"]:
        raise ConfigError("config: key 'sandbox.calibration': given with sandbox.calibrate false, which takes time "
                          "limits as they are; drop one of them")


def _check_shared_init(science: dict) -> None:
    """The shared init's seed is its own: no report seed (a seed replicates GRPO and sampling from it) and no
    design seed (whose init the design was tuned on)."""
    init_seed = science.get("init_seed")
    if init_seed is None:
        if science.get("init_from"):
            raise ConfigError("config: key 'science.init_from': needs science.init_seed, the seed that init was "
                              "built with")
        return
    for key in ("seeds", "design_seeds"):
        if init_seed in science[key]:
            raise ConfigError(f"config: key 'science.init_seed': {init_seed} is also in science.{key}; the shared "
                              "init needs a seed of its own")


def _read(path: str | Path) -> dict:
    try:
        with open(path) as f:
            raw = yaml.safe_load(f)  # YAML is a superset of JSON: a .json config reads the same way
    except yaml.YAMLError as e:
        raise ConfigError(f"config: {path} is not valid YAML ({e.__class__.__name__})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"config: {path}: not UTF-8 text (byte {e.start})") from None
    if raw is not None and not isinstance(raw, dict):
        raise ConfigError(f"config: {path} must hold a mapping at top level")
    return raw or {}


def load(path: str | Path) -> dict:
    """A whole experiment config file, validated."""
    return validate(_read(path))


def from_arg(text: str | None) -> dict:
    """`--config`: inline JSON or a YAML/JSON file holding the config, or the slice of it a stage reads.
    Validated (one line naming the key), every default filled; absent, the defaults. A data input that names
    a Hugging Face dataset comes as its local path in the cache (ewa.hub.localize_inputs)."""
    from ewa.hub import localize_inputs

    return localize_inputs(validate(read_arg(text), partial=True))


def read_arg(text: str | None) -> dict:
    """`--config` as given, before validation: what a flag that changes a key some defaults depend on
    (`ewa init --init DIR`) validates again with that key changed."""
    if not text:
        return {}
    if text.lstrip().startswith("{"):
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"--config: not valid JSON ({e.msg})") from None
        if not isinstance(raw, dict):
            raise ConfigError("--config: expected a JSON object")
    elif os.path.isfile(text):
        raw = _read(text)
    else:
        raise ConfigError(f"--config: {text} is neither inline JSON nor a file")
    return raw

