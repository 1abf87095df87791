"""The container engine CI starts: reachable through podman-py and docker-py (the runtime
plugins of the panel build on exactly these two clients)."""
import pytest

pytestmark = pytest.mark.runtime


def test_podman_api_answers(runtime_url):
    from podman import PodmanClient

    with PodmanClient(base_url=runtime_url) as client:
        assert client.ping()
        assert any("localhost/busybox:latest" in (image.tags or []) for image in client.images.list())


def test_docker_compatible_api_answers(runtime_url):
    import docker

    client = docker.DockerClient(base_url=runtime_url)
    try:
        assert client.ping()
    finally:
        client.close()
