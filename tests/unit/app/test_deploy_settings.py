"""The deploy settings: defaults, and start-up refused naming a bad one."""
from __future__ import annotations

import os

import pytest

from app.config import Config, ConfigError


def test_defaults_and_values():
    config = Config.from_env({})
    assert (config.deploy_health_timeout, config.deploy_drain) == (120.0, 2.0)
    config = Config.from_env({"SLIPWAY_DEPLOY_HEALTH_TIMEOUT": "30.5", "SLIPWAY_DEPLOY_DRAIN": "0"})
    assert (config.deploy_health_timeout, config.deploy_drain) == (30.5, 0.0)


def test_the_host_port_range_is_one_setting_of_the_app():
    """``SLIPWAY_HOST_PORTS`` is read once, into ``Config.host_ports`` (also from settings
    handed in directly); the app gives it to every deploy method and to the deploy jobs."""
    assert Config.from_env({}).host_ports == (20000, 29999)
    assert Config.from_env({"SLIPWAY_HOST_PORTS": " 30000 - 30010 "}).host_ports == (30000, 30010)
    assert Config(settings={"SLIPWAY_HOST_PORTS": "31000-31001"}).host_ports == (31000, 31001)
    assert Config(host_ports=(32000, 32000), settings={"SLIPWAY_HOST_PORTS": "1-2"}).host_ports == (32000, 32000)


@pytest.mark.parametrize("name, value", [
    ("SLIPWAY_DEPLOY_HEALTH_TIMEOUT", "0"), ("SLIPWAY_DEPLOY_HEALTH_TIMEOUT", "-5"),
    ("SLIPWAY_DEPLOY_HEALTH_TIMEOUT", "2m"), ("SLIPWAY_DEPLOY_HEALTH_TIMEOUT", "nan"),
    ("SLIPWAY_DEPLOY_HEALTH_TIMEOUT", "inf"), ("SLIPWAY_DEPLOY_DRAIN", "-1"), ("SLIPWAY_DEPLOY_DRAIN", "soon"),
    ("SLIPWAY_HOST_PORTS", "20000"), ("SLIPWAY_HOST_PORTS", "9-1"), ("SLIPWAY_HOST_PORTS", "1-70000"),
])
def test_a_bad_value_stops_start_up_naming_the_variable(name, value):
    with pytest.raises(ConfigError, match=name):
        Config.from_env({name: value})


def test_every_path_setting_is_absolute_against_the_start_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = Config.from_env({})
    assert (config.work_dir, config.backup_dir) == (str(tmp_path / "work"), str(tmp_path / "backups"))
    # the database is never the start folder's: SLIPWAY_DATA_DIR (relative: to the start
    # folder), else $XDG_DATA_HOME/slipway, else ~/.local/share/slipway
    assert config.database_url == f"sqlite:///{os.path.expanduser('~/.local/share/slipway/slipway.db')}"
    assert Config.from_env({"XDG_DATA_HOME": "/srv/data"}).database_url == "sqlite:////srv/data/slipway/slipway.db"
    assert Config.from_env({"SLIPWAY_DATA_DIR": "state", "XDG_DATA_HOME": "/srv/data"}).database_url == \
        f"sqlite:///{tmp_path / 'state' / 'slipway.db'}"
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "index.html").write_text("<html></html>\n")
    env = {"SLIPWAY_WORK_DIR": "jobs/../w", "SLIPWAY_BACKUP_DIR": "b", "SLIPWAY_ROUTES_FILE": "traefik/routes.yml",
           "SLIPWAY_WEB_DIR": "web", "SLIPWAY_DATABASE_URL": "sqlite:///data/s.db?timeout=5"}
    config = Config.from_env(env)
    assert (config.work_dir, config.backup_dir, config.routes_file, config.web_dir) == (
        str(tmp_path / "w"), str(tmp_path / "b"), str(tmp_path / "traefik" / "routes.yml"), str(tmp_path / "web"))
    assert config.database_url == f"sqlite:///{tmp_path / 'data' / 's.db'}?timeout=5"
    # the plugins read the settings: they see the same absolute paths
    assert config.settings["SLIPWAY_ROUTES_FILE"] == config.routes_file
    assert config.settings["SLIPWAY_WORK_DIR"] == config.work_dir
    for kept in ("sqlite:////srv/slipway.db", "sqlite:///:memory:", "postgresql://u@127.0.0.1:5432/db"):
        assert Config.from_env({"SLIPWAY_DATABASE_URL": kept}).database_url == kept
    monkeypatch.chdir("/")  # resolved once: a later change of folder changes nothing
    assert config.work_dir == str(tmp_path / "w")


def test_deploy_methods_read_the_settings_every_factory_reads(monkeypatch):
    """One source of settings: a configuration made in code without settings reads the
    environment for its deploy methods as for its factories (it gave the methods an empty
    mapping while the factories read the environment)."""
    from app.composition import Composition

    monkeypatch.setenv("SLIPWAY_SOURCE_MAX_MB", "7")
    parts = Composition(Config(database_url="sqlite:///:memory:"))
    assert parts.settings["SLIPWAY_SOURCE_MAX_MB"] == "7"
    assert parts.deploy_methods["git"].settings["SLIPWAY_SOURCE_MAX_MB"] == "7"
    given = Composition(Config(database_url="sqlite:///:memory:", settings={"SLIPWAY_SOURCE_MAX_MB": "9"}))
    assert given.deploy_methods["ai"].settings["SLIPWAY_SOURCE_MAX_MB"] == "9"
