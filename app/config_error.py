"""``ConfigError``, in a module of its own: ``app.config`` raises it and re-exports it,
and ``app.registries`` (which ``app.config`` reaches through ``app.pluginmanager``) raises
it too, without importing ``app.config`` back."""
from __future__ import annotations


class ConfigError(ValueError):
    """A setting is wrong; the message names the variable."""
