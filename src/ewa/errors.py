"""Errors a user can fix: the CLI prints them as one line (exit 2, no traceback); Snakemake shows it."""
from __future__ import annotations


class UserError(ValueError):
    """Bad input from the user (config, problem file, model directory, sample file, flag)."""


class ConfigError(UserError):
    """An experiment config that does not validate; the message names the key."""
