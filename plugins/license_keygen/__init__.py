"""License service ``keygen``: keys issued and enforced by a Keygen-style HTTP service.

Selected with ``SLIPWAY_LICENSE_SERVICE=keygen`` and configured from the environment:

- ``SLIPWAY_KEYGEN_URL``: the service's base URL, e.g. ``https://api.keygen.sh`` (required)
- ``SLIPWAY_KEYGEN_ACCOUNT``: the account id or slug (required)
- ``SLIPWAY_KEYGEN_TOKEN``: an admin or product bearer token (required)
- ``SLIPWAY_KEYGEN_TIMEOUT``: seconds per request (optional, default 10)

The service keeps no tables of its own, so ``migrate`` is the default no-op.
"""
from __future__ import annotations


from plugins.license_keygen.service import KeygenLicenseService
from ports.settings import seconds
from ports import hookimpl
from ports.licensing import LicenseServiceFactory

DEFAULT_TIMEOUT = 10.0


class KeygenFactory(LicenseServiceFactory):
    name = "keygen"

    def create(self, settings) -> KeygenLicenseService:
        """``settings.database`` is unused: the licenses live at the service."""
        return KeygenLicenseService(
            url=_required(settings, "SLIPWAY_KEYGEN_URL"),
            account=_required(settings, "SLIPWAY_KEYGEN_ACCOUNT"),
            token=_required(settings, "SLIPWAY_KEYGEN_TOKEN"),
            timeout=_timeout(settings),
        )


def _required(settings, variable: str) -> str:
    value = (settings.get(variable) or "").strip()
    if not value:
        raise ValueError(f"the keygen license service needs {variable}")
    return value


def _timeout(settings) -> float:
    return seconds(settings, "SLIPWAY_KEYGEN_TIMEOUT", DEFAULT_TIMEOUT)


@hookimpl
def register_license_services():
    return [KeygenFactory()]
