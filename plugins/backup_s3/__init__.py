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

import hashlib

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from ports import hookimpl
from ports.backups import BackupDestination, BackupDestinationFactory, DestinationError

PART = 8 * 1024 * 1024  # bytes per uploaded part (S3's least is 5 MiB but for the last)
CHUNK = 1024 * 1024
OPTIONS = ("kind", "endpoint", "bucket", "prefix", "region", "access_key_id", "secret_access_key")


def _reason(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message') or exc}"
    return str(exc)


class S3Destination(BackupDestination):
    kind = "s3"

    def __init__(self, name: str, client, bucket: str, prefix: str = "", endpoint: str | None = None,
                 secrets: tuple = ()):
        self.name, self.client, self.bucket, self.endpoint = name, client, bucket, endpoint
        self.prefix = prefix.strip("/")
        # never in a message, whatever a service answers (too short a value would hide words)
        self.secrets = tuple(s for s in secrets if s and len(s) >= 8)

    def describe(self) -> str:
        where = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        return f"{where} at {self.endpoint}" if self.endpoint else where

    def object_key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _error(self, doing: str, exc: Exception) -> DestinationError:
        message = f"backup destination {self.name} ({self.describe()}): {doing}: {_reason(exc)}"
        for secret in self.secrets:
            message = message.replace(secret, "***")
        return DestinationError(message)

    def put(self, key, chunks):
        name = self.object_key(key)
        try:
            upload = self.client.create_multipart_upload(Bucket=self.bucket, Key=name)["UploadId"]
        except (BotoCoreError, ClientError) as exc:
            raise self._error(f"cannot start uploading {name}", exc) from exc
        size, digest, parts, buffer = 0, hashlib.sha256(), [], bytearray()

        def send(data) -> None:
            number = len(parts) + 1
            try:
                reply = self.client.upload_part(Bucket=self.bucket, Key=name, UploadId=upload, PartNumber=number,
                                                Body=bytes(data))
            except (BotoCoreError, ClientError) as exc:
                raise self._error(f"uploading part {number} of {name}", exc) from exc
            parts.append({"PartNumber": number, "ETag": reply["ETag"]})

        try:
            for chunk in chunks:
                buffer += chunk
                size += len(chunk)
                digest.update(chunk)
                while len(buffer) >= PART:
                    send(memoryview(buffer)[:PART])
                    del buffer[:PART]
            if buffer or not parts:
                send(buffer)
            try:
                self.client.complete_multipart_upload(Bucket=self.bucket, Key=name, UploadId=upload,
                                                      MultipartUpload={"Parts": parts})
            except (BotoCoreError, ClientError) as exc:
                raise self._error(f"completing the upload of {name}", exc) from exc
        except BaseException:
            self._abort(name, upload)
            raise
        return size, digest.hexdigest()

    def _abort(self, name: str, upload: str) -> None:
        try:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=name, UploadId=upload)
        except (BotoCoreError, ClientError):  # best effort: an open upload is never an object
            pass

    def get(self, key, start=0):
        name = self.object_key(key)
        request = {"Bucket": self.bucket, "Key": name}
        if start:
            request["Range"] = f"bytes={start}-"
        try:
            body = self.client.get_object(**request)["Body"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise DestinationError(f"no object {name} at backup destination {self.name} "
                                       f"({self.describe()})") from None
            raise self._error(f"reading {name}", exc) from exc
        except BotoCoreError as exc:
            raise self._error(f"reading {name}", exc) from exc
        try:
            yield from body.iter_chunks(CHUNK)
        except (BotoCoreError, ClientError) as exc:
            raise self._error(f"reading {name}", exc) from exc
        finally:
            body.close()

    def exists(self, key):
        try:
            self.client.head_object(Bucket=self.bucket, Key=self.object_key(key))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return False
            raise self._error(f"looking for {self.object_key(key)}", exc) from exc
        except BotoCoreError as exc:
            raise self._error(f"looking for {self.object_key(key)}", exc) from exc
        return True

    def _abort_uploads(self, prefix: str) -> None:
        pages = self.client.get_paginator("list_multipart_uploads").paginate(Bucket=self.bucket, Prefix=prefix)
        for page in pages:
            for upload in page.get("Uploads", ()):
                self._abort(upload["Key"], upload["UploadId"])

    def delete(self, key):
        name = self.object_key(key)
        try:
            self._abort_uploads(name)
            self.client.delete_object(Bucket=self.bucket, Key=name)
        except (BotoCoreError, ClientError) as exc:
            raise self._error(f"deleting {name}", exc) from exc

    def delete_prefix(self, prefix):
        if not prefix.endswith("/") or prefix.startswith("/"):
            raise ValueError(f"not a folder of backup objects: {prefix!r}")
        folder = self.object_key(prefix)
        try:
            self._abort_uploads(folder)
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=folder):
                keys = [{"Key": item["Key"]} for item in page.get("Contents", ())]
                if keys:
                    self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})
        except (BotoCoreError, ClientError) as exc:
            raise self._error(f"deleting {folder}", exc) from exc


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
        client = boto3.session.Session().client(
            "s3", endpoint_url=endpoint, region_name=settings.get("region") or None,
            aws_access_key_id=access, aws_secret_access_key=secret,
            config=Config(connect_timeout=10, read_timeout=120, retries={"max_attempts": 3, "mode": "standard"},
                          s3={"addressing_style": "path"} if endpoint else None,
                          request_checksum_calculation="when_required",
                          response_checksum_validation="when_required"))
        return S3Destination(name, client, bucket, settings.get("prefix") or "", endpoint, secrets=(access, secret))


@hookimpl
def register_backup_destinations():
    return [S3Factory()]
