"""Which engine ``Config.from_env`` picks (app.engine_discovery), on real socket files:
the setting first, then the clients' variables, then the rootless Podman socket."""
from __future__ import annotations

import os
import socket
import tempfile

import pytest

from app.config import Config
from app.engine_discovery import find_engine


@pytest.fixture
def runtime_dir():
    with tempfile.TemporaryDirectory(prefix="sw-") as path:  # short: a socket's path fits in 108 bytes
        os.makedirs(os.path.join(path, "podman"))
        yield path


def _listening(path):
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(path)
    return sock


@pytest.mark.sockets
def test_the_rootless_podman_socket_is_found(runtime_dir):
    path = os.path.join(runtime_dir, "podman", "podman.sock")
    with _listening(path):
        config = Config.from_env({"XDG_RUNTIME_DIR": runtime_dir})
        assert (config.runtime, config.runtime_url) == ("podman", f"unix://{path}")
        assert config.runtime_source == "the rootless Podman socket in $XDG_RUNTIME_DIR"
        # an explicit plugin is kept: Docker's client on Podman's socket
        assert find_engine({"XDG_RUNTIME_DIR": runtime_dir, "SLIPWAY_RUNTIME": "docker"}).runtime == "docker"
        # the clients' variables come first, each with its client's plugin
        assert find_engine({"XDG_RUNTIME_DIR": runtime_dir, "CONTAINER_HOST": "unix:///a.sock"}) == \
            find_engine({"CONTAINER_HOST": "unix:///a.sock"})
        assert find_engine({"CONTAINER_HOST": "unix:///a.sock"}).url == "unix:///a.sock"
        docker = find_engine({"XDG_RUNTIME_DIR": runtime_dir, "DOCKER_HOST": "tcp://10.0.0.2:2375"})
        assert (docker.runtime, docker.url, docker.source) == ("docker", "tcp://10.0.0.2:2375", "DOCKER_HOST")
        # the operator's setting is never second-guessed, empty included (no engine)
        named = Config.from_env({"XDG_RUNTIME_DIR": runtime_dir, "SLIPWAY_RUNTIME_URL": "unix:///elsewhere.sock"})
        assert (named.runtime_url, named.runtime_source) == ("unix:///elsewhere.sock", "SLIPWAY_RUNTIME_URL")
        off = Config.from_env({"XDG_RUNTIME_DIR": runtime_dir, "SLIPWAY_RUNTIME_URL": "", "DOCKER_HOST": "tcp://x:1"})
        assert off.runtime_url is None
        # the plugins read the engine the server uses
        from app.composition import Composition

        assert Composition(config).settings["SLIPWAY_RUNTIME_URL"] == f"unix://{path}"


def test_a_file_that_is_not_a_socket_is_no_engine(runtime_dir):
    path = os.path.join(runtime_dir, "podman", "podman.sock")
    with open(path, "w"):
        pass
    engine = find_engine({"XDG_RUNTIME_DIR": runtime_dir})
    if engine.url is not None:  # this machine has a system-wide socket
        assert engine.source in ("the rootful Podman socket", "the Docker socket")
    else:
        assert engine.describe()["hint"].startswith("deploys need a container engine")
