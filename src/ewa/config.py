"""Load and validate an experiment config against schemas/config.schema.yaml, filling defaults.

A wrong key or value stops the run with one line naming the key and what was expected.
"""
from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import yaml

from ewa.merge import alpha_tag
from ewa.tiers import TierError, check_regimes

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    pass


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


def load_schema(path: str | Path = SCHEMA_PATH) -> dict:
    with open(path) as f:
        return yaml.safe_load(f)


def _key(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


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
        return f"key '{key}': expected {error.validator_value}, got {error.instance!r}"
    if error.validator == "oneOf" and "regimes" in key:
        return f"key '{key}': give exactly one of 'fraction' or 'max_size'"
    return f"key '{key}': {error.message}"


def validate(config: dict, schema: dict | None = None) -> dict:
    """Return a validated copy of `config` with every default filled in; raise ConfigError otherwise."""
    schema = schema or load_schema()
    config = copy.deepcopy(config if config is not None else {})
    validator = _with_defaults(jsonschema.Draft202012Validator)(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), str(e.absolute_path)))
    if errors:
        raise ConfigError(f"config: {_describe(jsonschema.exceptions.best_match(errors))}")
    _check_consistency(config)
    return config


def _check_consistency(config: dict) -> None:
    """Cross-key rules a JSON schema cannot say."""
    try:
        check_regimes(config["regimes"])
    except TierError as e:
        raise ConfigError(f"config: key {e}") from None
    names = [r["name"] for r in config["regimes"]]
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


def load(path: str | Path) -> dict:
    try:
        with open(path) as f:
            raw = yaml.safe_load(f)
    except yaml.YAMLError as e:
        raise ConfigError(f"config: {path} is not valid YAML ({e.__class__.__name__})") from None
    if raw is not None and not isinstance(raw, dict):
        raise ConfigError(f"config: {path} must hold a mapping at top level")
    return validate(raw or {})

