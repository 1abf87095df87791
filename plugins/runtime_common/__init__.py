"""Shared code of the ``podman`` and ``docker`` container-runtime plugins (not a plugin itself).

podman-py copies docker-py's object model (``client.containers.get(...).attrs``,
``images.build``, ``volumes``, ``networks``) and both talk to engines whose inspect
output has the Docker shape, so :class:`ClientRuntime` implements
:class:`ports.runtime.ContainerRuntime` once on top of that model. Each plugin subclasses
it with its own client library and fills in where the two differ (create arguments,
errors, stop/restart, logs, stats, pulls, running a Podman healthcheck).

Configuration read from the environment by both factories:

- ``SLIPWAY_RUNTIME_ULIMITS``: ulimits given to every container, e.g.
  ``nofile=20000:20000,nproc=32768:32768`` (``name=soft[:hard]``, comma or space
  separated). Needed on hosts where the OCI runtime may not raise rlimits: Podman sets
  ``nofile``/``nproc`` to 1048576 by default, which then makes every ``exec`` (and so every
  healthcheck) fail with "error setting rlimits".
"""
from plugins.runtime_common.base import ClientRuntime
from plugins.runtime_common.parsing import parse_ulimits
from plugins.runtime_common.settings import SETTINGS, ULIMITS

ULIMITS_VARIABLE = ULIMITS.env
URL_VARIABLE = "SLIPWAY_RUNTIME_URL"

__all__ = ["SETTINGS", "ULIMITS_VARIABLE", "URL_VARIABLE", "ClientRuntime", "parse_ulimits", "runtime_arguments",
           "ulimits_from_environment"]


def runtime_arguments(settings) -> dict:
    """What a runtime factory's ``create(settings)`` hands its runtime: the engine's ``url``
    (``SLIPWAY_RUNTIME_URL``; None: the client library's default), the ``ulimits``
    (``SLIPWAY_RUNTIME_ULIMITS``) and the other runtime ``settings``
    (:mod:`plugins.runtime_common.settings`). A bad value is a ``ValueError`` naming the
    variable."""
    from plugins.runtime_common.settings import RuntimeSettings

    return {"url": settings.get(URL_VARIABLE) or None, "ulimits": parse_ulimits(ULIMITS.read(settings)),
            "settings": RuntimeSettings.read(settings)}


def ulimits_from_environment(ulimits=None) -> tuple:
    """``ulimits`` as given (a string or parsed tuple), else ``SLIPWAY_RUNTIME_ULIMITS``."""
    import os

    if ulimits is None:
        ulimits = ULIMITS.read(os.environ)
    if isinstance(ulimits, str):
        return parse_ulimits(ulimits)
    return tuple(ulimits)
