"""Deploy-method factories hand their method everything through the constructor: the app's
resolver (``Settings.resolver``) to the methods that look registry hosts up, and the
declared ``SLIPWAY_REGISTRY_ALLOW_PRIVATE`` read with ``Setting.read``."""
from __future__ import annotations

import pytest

from core.errors import Invalid
from plugins.deploy_compose import ComposeFactory
from ports.resolver import Resolver
from ports.settings import Settings
from tests.support.image_plugin import image_plugin


class Fixed(Resolver):
    def resolve(self, host, timeout=1.0):
        return ["10.1.2.3"]


def _factories():
    [image] = image_plugin().register_deploy_methods()
    return [ComposeFactory(), image]


@pytest.mark.parametrize("factory", _factories(), ids=lambda f: f.name)
def test_the_method_gets_the_apps_resolver_and_the_declared_setting(factory):
    resolver = Fixed()
    method = factory.create(Settings({"SLIPWAY_REGISTRY_ALLOW_PRIVATE": "1"}, resolver=resolver))
    assert method.resolver is resolver and method.registry_allow_private is True
    assert factory.create(Settings({})).registry_allow_private is False


def test_settings_on_top_of_settings_keep_the_resolver():
    resolver = Fixed()
    assert Settings(Settings({}, resolver=resolver)).resolver is resolver


def test_a_private_registry_host_the_apps_resolver_answers_is_refused():
    [factory] = image_plugin().register_deploy_methods()
    method = factory.create(Settings({}, resolver=Fixed()))
    with pytest.raises(Invalid) as refused:
        method.plan({"image": "registry.example.com/app:1"}, {})
    assert "10.1.2.3" in refused.value.fields["image"]
