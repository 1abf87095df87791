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
from ports import hookimpl
from ports.licensing import LicenseServiceFactory
from ports.settings import Setting, positive_seconds, stripped

URL = Setting("SLIPWAY_KEYGEN_URL", stripped, None,
              "the `keygen` license service's base URL, e.g. `https://api.keygen.sh` (required with `keygen`)")
ACCOUNT = Setting("SLIPWAY_KEYGEN_ACCOUNT", stripped, None,
                  "the `keygen` service's account id or slug (required with `keygen`)")
TOKEN = Setting("SLIPWAY_KEYGEN_TOKEN", stripped, None,
                "an admin or product bearer token of the `keygen` service (required with `keygen`)", secret=True)
TIMEOUT = Setting("SLIPWAY_KEYGEN_TIMEOUT", positive_seconds, 10.0, "seconds per call to the `keygen` service")
SETTINGS = (URL, ACCOUNT, TOKEN, TIMEOUT)
DEFAULT_TIMEOUT = TIMEOUT.default


class KeygenFactory(LicenseServiceFactory):
    name = "keygen"

    def create(self, settings) -> KeygenLicenseService:
        """``settings.database`` is unused: the licenses live at the service."""
        return KeygenLicenseService(
            url=_required(settings, URL),
            account=_required(settings, ACCOUNT),
            token=_required(settings, TOKEN),
            timeout=TIMEOUT.read(settings),
        )


def _required(settings, setting: Setting) -> str:
    value = setting.read(settings)
    if not value:
        raise ValueError(f"the keygen license service needs {setting.env}")
    return value


@hookimpl
def register_license_services():
    return [KeygenFactory()]
