"""The base images the analyzers write builds on, per stack, and the port every generated
service listens on; ``SLIPWAY_IMAGE_*`` settings replace the defaults."""
from __future__ import annotations

DEFAULT_IMAGES = {
    "SLIPWAY_IMAGE_STATIC": "docker.io/library/busybox:stable",
    "SLIPWAY_IMAGE_PYTHON": "docker.io/library/python:3.12-slim",
    "SLIPWAY_IMAGE_NODE": "docker.io/library/node:22-alpine",
    "SLIPWAY_IMAGE_GO": "docker.io/library/golang:1.23-alpine",
}
PORT = 8080


def base_image(settings, variable: str) -> str:
    return (settings.get(variable) or "").strip() or DEFAULT_IMAGES[variable]
