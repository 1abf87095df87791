"""The rules of ``core.panel.secrets`` for ``secret_variables`` and of
``core.panel.deploy_job.with_environment`` (a git or ai service's variables in every
container's environment), without a database."""
from __future__ import annotations

import pytest

from core.errors import Invalid
from core.panel import secrets
from core.panel.compose import parse_compose
from core.panel.deploy_job import with_environment

COMPOSE = ("services:\n  web:\n    image: docker.io/library/nginx:alpine\n    environment:\n      MODE: compose\n"
           "      KEEP: 'yes'\n  worker:\n    image: docker.io/library/busybox:latest\n")


def test_the_variables_are_every_components_environment_over_the_composes():
    plan = with_environment(parse_compose(COMPOSE, {}), {"MODE": "production", "DATABASE_URL": "postgres://x"})
    env = {c.name: c.environment for c in plan.components}
    assert env["web"] == {"MODE": "production", "KEEP": "yes", "DATABASE_URL": "postgres://x"}
    assert env["worker"] == {"MODE": "production", "DATABASE_URL": "postgres://x"}
    same = parse_compose(COMPOSE, {})
    assert with_environment(same, {}) is same


def test_secret_variables_name_variables_and_a_templates_stay_secret():
    assert secrets.marked(("PASSWORD",), ["TOKEN"], {"TOKEN": "t", "PASSWORD": "p"}) == ("PASSWORD", "TOKEN")
    assert secrets.marked((), None, {"TOKEN": "t"}, had=("TOKEN", "GONE")) == ("TOKEN",)
    for given, why in ((["NOPE"], "not among variables"), ("TOKEN", "list"), ([1], "list")):
        with pytest.raises(Invalid) as refused:
            secrets.marked((), given, {"TOKEN": "t"})
        assert why in refused.value.fields["secret_variables"]


def test_a_secret_sent_masked_keeps_its_value_and_one_left_out_goes_only_when_no_longer_secret():
    stored = {"TOKEN": "t", "URL": "u", "MODE": "m"}
    assert secrets.kept({"TOKEN": "***"}, stored, ("TOKEN", "URL")) == {"TOKEN": "t", "URL": "u"}
    still = secrets.still_secret(("TOKEN", "URL"), [], planned=())
    assert still == () and secrets.kept({"TOKEN": "***"}, stored, ("TOKEN", "URL"), still) == {"TOKEN": "t"}
    assert secrets.still_secret(("TOKEN", "PASSWORD"), ["TOKEN"], planned=("PASSWORD",)) == ("TOKEN", "PASSWORD")
    assert secrets.still_secret(("TOKEN",), None) == ("TOKEN",)
    catalog = {"postgres": {"variables": [{"name": "POSTGRES_PASSWORD", "secret": True}, {"name": "POSTGRES_DB"}]}}
    assert secrets.template_secrets(catalog, "postgres") == ("POSTGRES_PASSWORD",)
    assert secrets.template_secrets(catalog, None) == ()
