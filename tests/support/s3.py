"""A real S3-compatible server for the tests: moto's server mode (``moto_server``) in a
subprocess on a free port, and boto3 clients of it.

``s3_server`` (a session fixture) starts it once; ``s3_bucket`` gives each test a fresh
bucket and the ``SLIPWAY_BACKUP_DESTINATIONS`` entry of an ``s3`` destination on it.
``S3Server.stop()`` kills the server (a test of a destination that goes away)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid

import boto3
import pytest
from botocore.config import Config

from tests.support.http import wait_answering
from tests.support.processes import free_port, read_output

ACCESS_KEY, SECRET_KEY, REGION = "testing-key", "testing-secret", "us-east-1"


class S3Server:
    def __init__(self):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.TemporaryFile(mode="w+")
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                   AWS_DEFAULT_REGION=REGION)
        self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                        env=env, stdout=self.log, stderr=subprocess.STDOUT)
        wait_answering(self.endpoint, alive=lambda: self.process.poll() is None, seconds=30,
                       said=lambda: f"moto's S3 server did not start: {self._log()[-2000:]}")

    def _log(self) -> str:
        return read_output(self.log)

    def client(self):
        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))

    def destination(self, bucket: str, prefix: str = "") -> dict:
        """A ``SLIPWAY_BACKUP_DESTINATIONS`` entry for ``bucket`` here."""
        return {"kind": "s3", "endpoint": self.endpoint, "bucket": bucket, "prefix": prefix, "region": REGION,
                "access_key_id": ACCESS_KEY, "secret_access_key": SECRET_KEY}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=20)


@pytest.fixture(scope="session")
def s3_server():
    server = S3Server()
    yield server
    server.stop()


class Bucket:
    def __init__(self, server: S3Server, name: str, prefix: str):
        self.server, self.name, self.prefix = server, name, prefix
        self.client = server.client()

    def destination(self) -> dict:
        return self.server.destination(self.name, self.prefix)

    def destinations_json(self, name: str = "offsite") -> str:
        return json.dumps({name: self.destination()})

    def keys(self) -> list[str]:
        found = self.client.list_objects_v2(Bucket=self.name).get("Contents", ())
        return sorted(item["Key"] for item in found)

    def uploads(self) -> list[str]:
        return sorted(u["Key"] for u in self.client.list_multipart_uploads(Bucket=self.name).get("Uploads", ()))

    def read(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.name, Key=key)["Body"].read()

    def write(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.name, Key=key, Body=data)


@pytest.fixture
def s3_bucket(s3_server):
    """A fresh bucket (prefix ``backups``) on the session's S3 server."""
    bucket = Bucket(s3_server, f"slipway-{uuid.uuid4().hex[:12]}", "backups")
    bucket.client.create_bucket(Bucket=bucket.name)
    return bucket
