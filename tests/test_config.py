import subprocess

import pytest
import yaml

from helpers import ROOT, grpo_settings, sft_settings, tiny_settings

from ewa.alphas import alpha_tag
from ewa.config import ConfigError, load, section, validate


def test_default_config_validates_and_fills_every_section():
    config = load(ROOT / "config.yaml")
    assert config["model"]["tiny"]["num_layers"] >= 1
    assert config["grpo"]["reward"] == "binary"
    assert config["sandbox"]["python"] == "/usr/bin/python3"
    assert config["benchmarks"]["mini"]["split"] == "heldout"
    # pre-registered: the reported seeds are not the ones the design was tuned on (nor the demo's)
    science = load(ROOT / "configs" / "science.yaml")
    assert set(science["science"]["seeds"]).isdisjoint({*science["science"]["design_seeds"], config["seed"]})


def test_empty_config_is_the_schema_defaults():
    config = validate({})
    assert [r["name"] for r in config["regimes"]] == ["low", "high"]
    assert config["merge"]["alphas"][0] < 0 < 1 < config["merge"]["alphas"][-1]


@pytest.mark.parametrize("config, fragment", [
    ({"merge": {"alpahs": [0.5]}}, "unknown key 'merge.alpahs'"),
    ({"sampel": {}}, "unknown key 'sampel'"),
    ({"merge": {"alphas": [0, "x"]}}, "key 'merge.alphas[1]': expected number, got 'x'"),
    # what `snakemake --config grpo='{max_steps: 10}'` hands over
    ({"grpo": {"max_steps": "10"}}, "expected integer, got '10' (given as text: unquote it in YAML; snakemake's --config passes nested values as text, so use a --configfile)"),
    ({"sample": {"backend": "tgi"}}, "key 'sample.backend': expected one of"),
    ({"regimes": [{"name": "a", "fraction": 1.0}, {"name": "b", "fraction": 0.5}]}, "low to high"),
    ({"regimes": [{"name": "a"}, {"name": "b", "fraction": 1.0}]}, "key 'regimes[0]'"),
    ({"merge": {"low": "nope"}}, "key 'merge.low'"),
    ({"sample": {"n": 4}, "evaluate": {"k": [1, 8], "budget": 4}}, "pass@8 needs at least 8 samples"),
    ({"merge": {"alphas": [0.5, 0.50]}}, "duplicate alphas"),
    ({"evaluate": {"folds": 1}}, "key 'evaluate.folds': expected 0 (one dev/test split) or at least 2 folds, got 1"),
    ({"science": {"seeds": [2, 100], "design_seeds": [0, 1, 2]}}, "seed(s) [2] also tuned the design"),
    ({"benchmarks": {"x": {"format": "ds1000"}}}, "key 'benchmarks.x.format'"),
    # a model directory's warm start is the config's own, learning rate included
    ({"model": {"init": "/models/m", "sft": {"steps": 5}}}, "key 'model.sft.learning_rate': a warm start of a model directory"),
])
def test_bad_config_is_one_line_naming_the_key(config, fragment):
    with pytest.raises(ConfigError) as e:
        validate(config)
    assert fragment in str(e.value)
    assert "\n" not in str(e.value)


def test_sft_warm_starts_the_tiny_init_alone_by_default():
    tiny, directory = section("model")["sft"], section("model", {"init": "/models/m"})["sft"]
    assert (tiny["steps"], tiny["learning_rate"]) == (600, 0.002)  # trained from scratch: it needs one
    assert directory["steps"] == 0 and "learning_rate" not in directory  # a user's model is used as it is
    given = section("model", {"init": "/models/m", "sft": {"steps": 5, "learning_rate": 1e-5}})["sft"]
    assert (given["steps"], given["learning_rate"]) == (5, 1e-5)


def test_configfile_hint_only_for_numbers_given_as_text():
    with pytest.raises(ConfigError) as e:
        validate({"merge": {"alphas": [0, "x"]}})
    assert "configfile" not in str(e.value)


def test_alpha_tag_is_canonical():
    assert alpha_tag(0.5) == alpha_tag(0.50) == "+0.50"
    assert alpha_tag(-1) == "-1.00"
    assert alpha_tag(0) == "+0.00"


def test_snakemake_stops_on_a_bad_key_with_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"merge": {"alpahs": [1]}}))
    out = subprocess.run([str(ROOT / ".venv/bin/snakemake"), "-n", "--configfile", str(bad)],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode != 0
    assert "unknown key 'merge.alpahs'" in out.stdout + out.stderr


def test_schema_defaults_are_the_stage_defaults():
    """The schema documents each stage's knobs and is their only default: a section built the way the
    CLI builds a stage's is the validated config's."""
    config = validate({})
    assert config["model"]["tiny"] == tiny_settings() == section("model")["tiny"]
    assert config["model"]["sft"] == sft_settings() == section("model")["sft"]
    assert config["grpo"] == grpo_settings() == section("grpo")


def test_the_tiny_models_heads_are_checked_with_the_config():
    """Checked when the config is read, for the tiny init only (a local model ignores model.tiny)."""
    odd = {"hidden_size": 32, "num_heads": 3, "num_kv_heads": 1}
    with pytest.raises(ConfigError, match=r"^config: key 'model.tiny': hidden_size must divide by num_heads"):
        section("model", {"tiny": odd})
    assert section("model", {"init": "/models/qwen", "tiny": odd})["tiny"]["num_heads"] == 3


def test_a_config_file_that_is_not_utf8_is_one_line_naming_it(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"seed: 0\n\xff\xfe: 1\n")
    with pytest.raises(ConfigError, match=rf"config: {bad}: not UTF-8 text"):
        load(bad)
