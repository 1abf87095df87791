"""Which images a deploy pulls (core.panel.deploys, with a fake engine): a missing one always,
a present one again on redeploy (a moved tag brings the latest), never a local build."""
from __future__ import annotations

import pytest

from core.panel.deploy_job import _image


class FakeEngine:
    def __init__(self, have=(), registry_up=True):
        self.have, self.registry_up, self.pulled = set(have), registry_up, []

    def has_image(self, image):
        return image in self.have

    def pull_image(self, image, *, timeout=None, cancel=None):
        self.pulled.append(image)
        if not self.registry_up or image.startswith("localhost/"):
            raise RuntimeError(f"pulling {image}: no registry")
        self.have.add(image)


@pytest.mark.parametrize("have, refresh, pulled", [
    ((), False, ["docker.io/library/redis:7"]),  # missing: pulled on any deploy
    (("docker.io/library/redis:7",), False, []),  # present, first deploy: used as it is
    (("docker.io/library/redis:7",), True, ["docker.io/library/redis:7"]),  # redeploy: pulled again
])
def test_pulls(have, refresh, pulled):
    engine = FakeEngine(have)
    assert _image(engine, "docker.io/library/redis:7", refresh=refresh) is None
    assert engine.pulled == pulled


def test_local_builds_are_never_pulled():
    engine = FakeEngine({"localhost/slw-svc_1-app:abc"})
    assert _image(engine, "localhost/slw-svc_1-app:abc", refresh=True) is None and engine.pulled == []


def test_a_redeploy_without_the_registry_keeps_the_local_copy_and_says_so():
    engine = FakeEngine({"docker.io/library/redis:7"}, registry_up=False)
    note = _image(engine, "docker.io/library/redis:7", refresh=True)
    assert "could not pull docker.io/library/redis:7" in note and "copy the engine has" in note


def test_a_missing_image_that_cannot_be_pulled_fails_the_deploy():
    with pytest.raises(RuntimeError, match="no registry"):
        _image(FakeEngine(registry_up=False), "docker.io/library/redis:7", refresh=False)


@pytest.mark.parametrize("refresh", [False, True])
def test_an_absent_localhost_image_is_not_found_and_never_pulled(refresh):
    """``localhost/`` without a port names the engine's own images: a pull of one would
    ask a registry on the host's port 443."""
    engine = FakeEngine()
    with pytest.raises(RuntimeError, match="image not found: localhost/billing:latest"):
        _image(engine, "localhost/billing:latest", refresh=refresh)
    assert engine.pulled == []
    _image(engine, "localhost:5000/billing:latest", refresh=False)  # a registry (run_job refuses it before)
    assert engine.pulled == ["localhost:5000/billing:latest"]
