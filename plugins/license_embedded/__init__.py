"""License service ``embedded``: licenses and policies kept in Slipway's own database,
keys signed with Ed25519 so that a panel can verify them offline.

A key is ``SLW1.<payload>.<signature>``, both parts base64url without padding; the
payload is the JSON ``{"v": 1, "lid": <service license id>, "policy": ..., "iat": <unix
seconds>}`` and the signature covers the payload part's bytes. ``verify_key`` checks one
with the public key (``slipway license public-key`` prints it). Suspension, revocation
and policy changes are state here that a panel reads at its next online validation.
"""
from __future__ import annotations

import base64
import json
import time
import uuid

import peewee
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ports import hookimpl
from ports.licensing import IssuedKey, LicenseService, LicenseServiceError, LicenseServiceFactory

KEY_PREFIX = "SLW1"
DEFAULT_POLICIES = ("web-host", "web-pro", "power-user")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _models(db):
    class Base(peewee.Model):
        class Meta:
            database = db

    class Policy(Base):
        name = peewee.CharField(max_length=64, primary_key=True)

        class Meta:
            table_name = "embedded_license_policy"

    class ServiceLicense(Base):
        id = peewee.CharField(max_length=36, primary_key=True)
        policy = peewee.CharField(max_length=64)
        status = peewee.CharField(max_length=16)  # active, suspended, revoked
        metadata = peewee.TextField(default="{}")
        issued_at = peewee.BigIntegerField()

        class Meta:
            table_name = "embedded_license"

    class SigningKey(Base):
        id = peewee.IntegerField(primary_key=True)
        private_pem = peewee.TextField()

        class Meta:
            table_name = "embedded_license_signing_key"

    return Policy, ServiceLicense, SigningKey


def verify_key(key: str, public_key: Ed25519PublicKey) -> dict:
    """The payload of a genuine key; ``ValueError`` for anything else."""
    try:
        prefix, payload, signature = key.split(".")
        if prefix != KEY_PREFIX:
            raise ValueError("not a Slipway license key")
        public_key.verify(_unb64(signature), payload.encode("ascii"))
        return json.loads(_unb64(payload))
    except (InvalidSignature, ValueError, UnicodeError) as exc:
        raise ValueError("invalid license key") from exc


class EmbeddedLicenseService(LicenseService):
    name = "embedded"

    def __init__(self, db):
        self.db = db
        self.Policy, self.License, self.SigningKey = _models(db)
        self._private: Ed25519PrivateKey | None = None

    def _signer(self) -> Ed25519PrivateKey:
        if self._private is None:
            row = self.SigningKey.get_or_none(self.SigningKey.id == 1)
            if row is None:
                raise LicenseServiceError("the embedded license service has no signing key: run `slipway init`")
            self._private = serialization.load_pem_private_key(row.private_pem.encode(), password=None)
        return self._private

    def public_key(self) -> Ed25519PublicKey:
        return self._signer().public_key()

    def _get(self, service_license_id: str):
        row = self.License.get_or_none(self.License.id == service_license_id)
        if row is None:
            raise LicenseServiceError(f"embedded license service: no license {service_license_id}")
        return row

    def _set(self, service_license_id: str, **values) -> None:
        self._get(service_license_id)
        self.License.update(**values).where(self.License.id == service_license_id).execute()

    def issue(self, *, policy: str, metadata: dict) -> IssuedKey:
        if self.Policy.get_or_none(self.Policy.name == policy) is None:
            raise LicenseServiceError(f"embedded license service: no policy {policy!r}")
        service_id = str(uuid.uuid4())
        issued_at = int(time.time())
        payload = _b64(json.dumps({"v": 1, "lid": service_id, "policy": policy, "iat": issued_at},
                                  separators=(",", ":"), sort_keys=True).encode())
        signature = _b64(self._signer().sign(payload.encode("ascii")))
        self.License.insert(id=service_id, policy=policy, status="active", metadata=json.dumps(metadata),
                            issued_at=issued_at).execute()
        return IssuedKey(service_license_id=service_id, key=f"{KEY_PREFIX}.{payload}.{signature}")

    def suspend(self, service_license_id: str) -> None:
        self._set(service_license_id, status="suspended")

    def reinstate(self, service_license_id: str) -> None:
        self._set(service_license_id, status="active")

    def revoke(self, service_license_id: str) -> None:
        self._set(service_license_id, status="revoked")

    def change_policy(self, service_license_id: str, policy: str) -> None:
        if self.Policy.get_or_none(self.Policy.name == policy) is None:
            raise LicenseServiceError(f"embedded license service: no policy {policy!r}")
        self._set(service_license_id, policy=policy)

    def update_metadata(self, service_license_id: str, metadata: dict) -> None:
        self._set(service_license_id, metadata=json.dumps(metadata))

    def status(self, service_license_id: str) -> dict:
        row = self._get(service_license_id)
        return {"id": row.id, "policy": row.policy, "status": row.status, "metadata": json.loads(row.metadata)}


class EmbeddedFactory(LicenseServiceFactory):
    name = "embedded"

    def create(self, settings) -> LicenseService:
        return EmbeddedLicenseService(settings.database)

    def migrate(self, database) -> None:
        Policy, ServiceLicense, SigningKey = _models(database)
        with database.atomic():
            database.create_tables([Policy, ServiceLicense, SigningKey], safe=True)
            for name in DEFAULT_POLICIES:
                Policy.insert(name=name).on_conflict_ignore().execute()
            if SigningKey.get_or_none(SigningKey.id == 1) is None:
                pem = Ed25519PrivateKey.generate().private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
                SigningKey.insert(id=1, private_pem=pem.decode()).on_conflict_ignore().execute()


@hookimpl
def register_license_services():
    return [EmbeddedFactory()]
