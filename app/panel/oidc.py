"""The OpenID Connect client of the browser login (authorization code flow with PKCE).

Authlib does the protocol: the authorization URL (state, nonce, S256 code challenge), the
code exchange at the token endpoint (client authentication ``client_secret_basic``, or
``none`` without a secret), and the ID-token claim checks (``authlib.oidc.core.CodeIDToken``:
issuer, audience, expiry, issued-at, nonce, azp, at_hash); joserfc verifies the signature
against the provider's JWKS. httpx carries every back-channel call.

The discovery document (``{issuer}/.well-known/openid-configuration``) and the JWKS are
fetched on first use and kept; the JWKS is fetched again once when a token names a key
id it does not have (key rotation).
"""
from __future__ import annotations

import logging

import httpx
from authlib.common.errors import AuthlibBaseError
from authlib.integrations.httpx_client import AsyncOAuth2Client
from authlib.oidc.core import CodeIDToken
from joserfc import jwt
from joserfc.errors import BadSignatureError, ClaimError, ExpiredTokenError, InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet

log = logging.getLogger("slipway.oidc")

SCOPE = "openid email"
#: signature algorithms accepted for ID tokens (asymmetric only; never "none")
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
LEEWAY = 60  # seconds of clock skew allowed on exp, iat and nbf


class OidcError(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class ProviderUnavailable(OidcError):
    """The identity provider could not be reached or answered nonsense (503)."""


class LoginRefused(OidcError):
    """The provider refused the code, or its ID token does not hold (401)."""


class OidcClient:
    def __init__(self, *, issuer: str, client_id: str, client_secret: str | None, redirect_uri: str,
                 timeout: float = 10.0):
        self.issuer = issuer
        self.client_id = client_id
        self.client_secret = client_secret
        self.redirect_uri = redirect_uri
        self.timeout = timeout
        self._metadata: dict | None = None
        self._keys: KeySet | None = None

    # --- discovery and keys ------------------------------------------------------------------

    async def _get_json(self, url: str) -> dict:
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as http:
                resp = await http.get(url, headers={"Accept": "application/json"})
            resp.raise_for_status()
            document = resp.json()
        except (httpx.HTTPError, ValueError) as exc:
            log.warning("identity provider: %s: %s", url, exc)
            raise ProviderUnavailable(f"the identity provider could not be reached ({url})") from exc
        if not isinstance(document, dict):
            raise ProviderUnavailable(f"the identity provider answered something other than a JSON object ({url})")
        return document

    async def metadata(self) -> dict:
        if self._metadata is None:
            url = self.issuer.rstrip("/") + "/.well-known/openid-configuration"
            document = await self._get_json(url)
            if str(document.get("issuer", "")).rstrip("/") != self.issuer.rstrip("/"):
                raise ProviderUnavailable(f"the discovery document's issuer {document.get('issuer')!r} is not "
                                          f"SLIPWAY_OIDC_ISSUER {self.issuer!r}")
            missing = [k for k in ("authorization_endpoint", "token_endpoint", "jwks_uri") if not document.get(k)]
            if missing:
                raise ProviderUnavailable("the discovery document lacks " + ", ".join(missing))
            self._metadata = document
        return self._metadata

    async def _key_set(self, refresh: bool = False) -> KeySet:
        if self._keys is None or refresh:
            jwks = await self._get_json((await self.metadata())["jwks_uri"])
            try:
                self._keys = KeySet.import_key_set(jwks)
            except (JoseError, ValueError, KeyError, TypeError) as exc:
                raise ProviderUnavailable(f"the identity provider's JWKS is not usable: {exc}") from exc
        return self._keys

    def _oauth(self) -> AsyncOAuth2Client:
        return AsyncOAuth2Client(
            client_id=self.client_id, client_secret=self.client_secret, scope=SCOPE,
            redirect_uri=self.redirect_uri, code_challenge_method="S256", timeout=self.timeout,
            token_endpoint_auth_method="client_secret_basic" if self.client_secret else "none")

    # --- the flow ------------------------------------------------------------------------------

    async def authorization_url(self, *, state: str, nonce: str, code_verifier: str) -> str:
        endpoint = (await self.metadata())["authorization_endpoint"]
        async with self._oauth() as client:
            url, _ = client.create_authorization_url(endpoint, state=state, nonce=nonce, code_verifier=code_verifier)
        return url

    async def exchange(self, *, code: str, code_verifier: str) -> dict:
        """The token response for ``code``; ``LoginRefused`` when the provider says no."""
        endpoint = (await self.metadata())["token_endpoint"]
        try:
            async with self._oauth() as client:
                token = await client.fetch_token(endpoint, grant_type="authorization_code", code=code,
                                                 code_verifier=code_verifier)
        except AuthlibBaseError as exc:
            raise LoginRefused(f"the identity provider refused the authorization code: {exc.error}") from exc
        except httpx.HTTPError as exc:
            log.warning("identity provider token endpoint: %s", exc)
            raise ProviderUnavailable("the identity provider's token endpoint could not be reached") from exc
        except ValueError as exc:  # not JSON
            raise LoginRefused("the identity provider's token endpoint answered something other than JSON") from exc
        return dict(token)

    async def id_token_claims(self, token: dict, *, nonce: str, now: int) -> dict:
        """Verify the token response's ID token: signature (JWKS), ``iss``, ``aud``, ``exp``,
        ``iat``, ``nonce``; returns its claims. ``LoginRefused`` names what failed."""
        raw = token.get("id_token")
        if not isinstance(raw, str) or not raw:
            raise LoginRefused("the identity provider's token response has no ID token")
        metadata = await self.metadata()
        allowed = [a for a in metadata.get("id_token_signing_alg_values_supported") or ["RS256"] if a in ALGORITHMS]
        try:
            try:
                decoded = jwt.decode(raw, await self._key_set(), algorithms=allowed)
            except InvalidKeyIdError:
                decoded = jwt.decode(raw, await self._key_set(refresh=True), algorithms=allowed)
        except BadSignatureError as exc:
            raise LoginRefused("invalid ID token: bad signature") from exc
        except InvalidKeyIdError as exc:
            raise LoginRefused("invalid ID token: signed with a key the provider does not publish") from exc
        except (JoseError, ValueError) as exc:
            raise LoginRefused(f"invalid ID token: {getattr(exc, 'description', None) or exc}") from exc
        options = {"iss": {"essential": True, "value": metadata["issuer"]},
                   "aud": {"essential": True, "value": self.client_id}}
        params = {"nonce": nonce, "client_id": self.client_id, "access_token": token.get("access_token")}
        claims = CodeIDToken(decoded.claims, decoded.header, options, params)
        try:
            claims.validate(now=now, leeway=LEEWAY)
        except ExpiredTokenError as exc:
            raise LoginRefused("invalid ID token: expired") from exc
        except ClaimError as exc:
            name = getattr(exc, "claim", None) or ""
            raise LoginRefused(f"invalid ID token: {exc.description}" + (f" ({name})" if name and name not in
                                                                          exc.description else "")) from exc
        return dict(claims)
