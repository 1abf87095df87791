"""The ``s3`` destination itself (boto3 and botocore, imported only when an ``s3``
destination is configured: see :mod:`plugins.backup_s3`)."""
from __future__ import annotations

import hashlib

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from core.redaction import redact
from plugins.backup_s3 import PART
from ports.backups import BackupDestination, DestinationError

CHUNK = 1024 * 1024


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
        return DestinationError(redact(f"backup destination {self.name} ({self.describe()}): {doing}: {_reason(exc)}",
                                       self.secrets))

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


def client(endpoint: str | None, region: str | None, access: str | None, secret: str | None):
    """A boto3 S3 client: path-style addressing for an endpoint of the operator's, bounded
    timeouts and retries, checksums only where S3 requires them (S3-compatible servers
    differ in the newer ones)."""
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name=region,
        aws_access_key_id=access, aws_secret_access_key=secret,
        config=Config(connect_timeout=10, read_timeout=120, retries={"max_attempts": 3, "mode": "standard"},
                      s3={"addressing_style": "path"} if endpoint else None,
                      request_checksum_calculation="when_required",
                      response_checksum_validation="when_required"))
