"""The deploy settings: defaults, and start-up refused naming a bad one."""
from __future__ import annotations

import pytest

from app.config import Config, ConfigError


def test_defaults_and_values():
    config = Config.from_env({})
    assert (config.deploy_health_timeout, config.deploy_drain) == (120.0, 2.0)
    config = Config.from_env({"SLIPWAY_DEPLOY_HEALTH_TIMEOUT": "30.5", "SLIPWAY_DEPLOY_DRAIN": "0"})
    assert (config.deploy_health_timeout, config.deploy_drain) == (30.5, 0.0)


@pytest.mark.parametrize("name, value", [
    ("SLIPWAY_DEPLOY_HEALTH_TIMEOUT", "0"), ("SLIPWAY_DEPLOY_HEALTH_TIMEOUT", "-5"),
    ("SLIPWAY_DEPLOY_HEALTH_TIMEOUT", "2m"), ("SLIPWAY_DEPLOY_HEALTH_TIMEOUT", "nan"),
    ("SLIPWAY_DEPLOY_HEALTH_TIMEOUT", "inf"), ("SLIPWAY_DEPLOY_DRAIN", "-1"), ("SLIPWAY_DEPLOY_DRAIN", "soon"),
])
def test_a_bad_value_stops_start_up_naming_the_variable(name, value):
    with pytest.raises(ConfigError, match=name):
        Config.from_env({name: value})
