"""The base images the analyzers write builds on, per stack, and the port every generated
service listens on; ``SLIPWAY_IMAGE_*`` settings (declared here: :data:`SETTINGS`) replace
the defaults."""
from __future__ import annotations

from ports.settings import Setting, stripped

IMAGE_STATIC = Setting(
    "SLIPWAY_IMAGE_STATIC", stripped, "docker.io/library/busybox:stable",
    "base image of generated static-site builds (busybox `httpd -f -p 8080 -h /www`), and the default `IMAGE` "
    "of the `static-site` template (`make run`'s demo sets it to a busybox image the engine has when the "
    "default cannot be pulled)")
IMAGE_PYTHON = Setting("SLIPWAY_IMAGE_PYTHON", stripped, "docker.io/library/python:3.12-slim",
                       "base image of generated Python builds")
IMAGE_NODE = Setting("SLIPWAY_IMAGE_NODE", stripped, "docker.io/library/node:22-alpine",
                     "base image of generated Node.js builds")
IMAGE_GO = Setting("SLIPWAY_IMAGE_GO", stripped, "docker.io/library/golang:1.23-alpine",
                   "base image of generated Go builds")
#: the base images, one setting each (the analyzers and the ``static-site`` template read them)
SETTINGS = (IMAGE_STATIC, IMAGE_PYTHON, IMAGE_NODE, IMAGE_GO)
BY_NAME = {setting.env: setting for setting in SETTINGS}
DEFAULT_IMAGES = {setting.env: setting.default for setting in SETTINGS}
PORT = 8080


def base_image(settings, variable: str) -> str:
    return BY_NAME[variable].read(settings)
