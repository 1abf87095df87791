"""The ``keygen`` license service: a client for a Keygen-style HTTP API (JSON:API, v1).

Every call is one request; anything but a 2xx answer, and any transport error or
timeout, raises ``LicenseServiceError`` with a short message (method, path, HTTP status,
the service's first error) that never contains the bearer token.
"""
from __future__ import annotations

from urllib.parse import quote

import httpx

from ports.licensing import IssuedKey, LicenseService, LicenseServiceError

JSONAPI = "application/vnd.api+json"


class KeygenLicenseService(LicenseService):
    name = "keygen"

    def __init__(self, *, url: str, account: str, token: str, timeout: float = 10.0):
        self._token = token
        self._licenses = f"/v1/accounts/{quote(account, safe='')}/licenses"
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            timeout=timeout,
            headers={"Authorization": f"Bearer {token}", "Accept": JSONAPI, "Content-Type": JSONAPI},
        )

    # --- the port ---------------------------------------------------------------------

    def issue(self, *, policy: str, metadata: dict) -> IssuedKey:
        document = self._call("POST", self._licenses, {
            "data": {
                "type": "licenses",
                "attributes": {"metadata": metadata},
                "relationships": {"policy": {"data": {"type": "policies", "id": policy}}},
            }
        })
        try:
            data = document["data"]
            return IssuedKey(service_license_id=str(data["id"]), key=str(data["attributes"]["key"]))
        except (KeyError, TypeError) as exc:
            raise LicenseServiceError("keygen: POST licenses: answer has no license id and key") from exc

    def suspend(self, service_license_id: str) -> None:
        self._call("POST", self._license(service_license_id, "/actions/suspend"))

    def reinstate(self, service_license_id: str) -> None:
        self._call("POST", self._license(service_license_id, "/actions/reinstate"))

    def revoke(self, service_license_id: str) -> None:
        self._call("DELETE", self._license(service_license_id, "/actions/revoke"))

    def change_policy(self, service_license_id: str, policy: str) -> None:
        self._call("PUT", self._license(service_license_id, "/policy"),
                   {"data": {"type": "policies", "id": policy}})

    def update_metadata(self, service_license_id: str, metadata: dict) -> None:
        self._call("PATCH", self._license(service_license_id),
                   {"data": {"type": "licenses", "attributes": {"metadata": metadata}}})

    def close(self) -> None:
        """Close the HTTP connection pool (the port has no lifecycle; tests call this)."""
        self._http.close()

    # --- HTTP -------------------------------------------------------------------------

    def _license(self, service_license_id: str, suffix: str = "") -> str:
        return f"{self._licenses}/{quote(service_license_id, safe='')}{suffix}"

    def _call(self, method: str, path: str, body: dict | None = None) -> dict | None:
        what = f"{method} {path}"
        try:
            response = self._http.request(method, path, json=body)
        except httpx.TimeoutException as exc:
            raise self._error(f"{what}: timed out") from exc
        except httpx.HTTPError as exc:
            raise self._error(f"{what}: {type(exc).__name__}: {exc}") from exc
        try:
            response.raise_for_status()
        except httpx.HTTPStatusError as exc:
            raise self._error(f"{what}: HTTP {response.status_code}{_first_error(response)}") from exc
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise self._error(f"{what}: HTTP {response.status_code} with a body that is not JSON") from exc

    def _error(self, message: str) -> LicenseServiceError:
        # The token is never put in a message on purpose; this guards against a service
        # or a library echoing it back.
        return LicenseServiceError("keygen: " + message.replace(self._token, "[token]"))


def _first_error(response: httpx.Response) -> str:
    """``": title: detail"`` from a JSON:API error document, or the reason phrase."""
    try:
        first = response.json()["errors"][0]
        parts = [str(first[k]) for k in ("title", "detail") if first.get(k)]
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        parts = []
    text = ": ".join(parts) or response.reason_phrase
    return f": {text[:200]}" if text else ""
