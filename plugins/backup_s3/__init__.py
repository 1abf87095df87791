"""Backup destination kind ``s3``: objects in a bucket of any S3-compatible service,
through boto3.

Options (``SLIPWAY_BACKUP_DESTINATIONS``): ``bucket`` (required), ``endpoint`` (the
service's URL; AWS's when absent), ``region``, ``prefix`` (prepended to every key, with a
``/``), ``access_key_id`` and ``secret_access_key`` (boto3's own lookup when absent:
environment, profile, instance role).

A ``put`` is one multipart upload fed from the stream as it comes, ``PART`` bytes per
part (only one part is ever held in memory); the object exists only once the upload is
completed, after the stream ended. When the stream or an upload fails the upload is
aborted, so nothing is stored; an upload a killed process left open is never an object
(S3 shows no part of it) and ``delete`` aborts it. Reads stream the object's body, from
an offset with a ``Range`` request."""
from __future__ import annotations

from ports import hookimpl
from ports.backups import BackupDestinationFactory

PART = 8 * 1024 * 1024  # bytes per uploaded part (S3's least is 5 MiB but for the last)
OPTIONS = ("kind", "endpoint", "bucket", "prefix", "region", "access_key_id", "secret_access_key")


class S3Factory(BackupDestinationFactory):
    name = "s3"

    def create(self, settings):
        name = settings.get("name") or "s3"
        unknown = sorted(set(settings) - set(OPTIONS) - {"name"})
        if unknown:
            raise ValueError(f"backup destination {name!r}: unknown option {unknown[0]!r} "
                             f"(an s3 destination takes {', '.join(OPTIONS[1:])})")
        bucket = (settings.get("bucket") or "").strip()
        if not bucket:
            raise ValueError(f"backup destination {name!r}: an s3 destination needs \"bucket\"")
        endpoint = (settings.get("endpoint") or "").strip() or None
        if endpoint and not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"backup destination {name!r}: \"endpoint\" must be an http:// or https:// URL")
        access, secret = settings.get("access_key_id") or None, settings.get("secret_access_key") or None
        if bool(access) != bool(secret):
            raise ValueError(f"backup destination {name!r}: give both \"access_key_id\" and \"secret_access_key\" "
                             "or neither")
        from plugins.backup_s3 import destination  # boto3: imported only where an s3 destination is configured

        client = destination.client(endpoint, settings.get("region") or None, access, secret)
        return destination.S3Destination(name, client, bucket, settings.get("prefix") or "", endpoint,
                                         secrets=(access, secret))


@hookimpl
def register_backup_destinations():
    return [S3Factory()]
