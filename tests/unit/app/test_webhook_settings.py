"""The partner webhook settings: defaults, and start-up refused naming a bad one."""
from __future__ import annotations

import pytest

from app.config import Config, ConfigError


def test_defaults():
    config = Config.from_env({})
    assert (config.webhook_retry_base, config.webhook_allow_private, config.webhook_timeout) == (30.0, False, 10.0)
    config = Config.from_env({"SLIPWAY_WEBHOOK_RETRY_BASE": "0.2", "SLIPWAY_WEBHOOK_ALLOW_PRIVATE": "1",
                              "SLIPWAY_WEBHOOK_TIMEOUT": "2.5"})
    assert (config.webhook_retry_base, config.webhook_allow_private, config.webhook_timeout) == (0.2, True, 2.5)


@pytest.mark.parametrize("name, value", [
    ("SLIPWAY_WEBHOOK_RETRY_BASE", "0"), ("SLIPWAY_WEBHOOK_RETRY_BASE", "-1"), ("SLIPWAY_WEBHOOK_RETRY_BASE", "soon"),
    ("SLIPWAY_WEBHOOK_RETRY_BASE", "nan"), ("SLIPWAY_WEBHOOK_TIMEOUT", "0"), ("SLIPWAY_WEBHOOK_ALLOW_PRIVATE", "yes"),
    ("SLIPWAY_WEBHOOK_ALLOW_PRIVATE", "2"),
])
def test_a_bad_value_stops_start_up_naming_the_variable(name, value):
    with pytest.raises(ConfigError, match=name):
        Config.from_env({name: value})
