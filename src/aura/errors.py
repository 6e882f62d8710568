"""The user-facing errors every layer raises: one line on stderr, no traceback, no output written."""
from __future__ import annotations


class UserError(ValueError):
    """A mistake in what the user gave (config, command line, input file). The CLI prints it as
    one line on stderr, without a traceback, and exits non-zero; no output is written."""


class ConfigError(UserError):
    pass
