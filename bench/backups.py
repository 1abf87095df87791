"""Backup and restore throughput of a volume to S3, next to ``tar`` by hand, against a
real engine and a real S3-compatible server (moto's server mode, started here).

    python -m bench.backups [--mb 1024]

A compose service with one volume is filled with ``--mb`` MB of random bytes, then:

1. Slipway: ``POST .../backups`` to the ``s3`` destination until ``completed`` (the volume
   exported by the engine, archived and uploaded as one streamed multipart upload), and
   ``POST .../restore`` until ``completed`` (the object read back and checked, the volume
   emptied and filled again);
2. by hand, in the same run on the same data: ``tar -c`` of the volume's folder on the
   host, its output uploaded to the same bucket with boto3's managed upload; then the
   object downloaded and piped into ``tar -x`` in the emptied folder (run it as the
   engine's user: root for rootful Podman, or inside ``podman unshare``).

Prints MB/s (of the volume's data) for each, a table and one JSON line. Needs
``SLIPWAY_RUNTIME_URL`` (and ``SLIPWAY_RUNTIME_ULIMITS`` where the tests need it); the
podman CLI reads ``CONTAINERS_CONF``. SQLite in a temporary directory.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

import boto3
import httpx
from botocore.config import Config

from bench.servers import cli, free_port, stop, uvicorn

IMAGE = "localhost/busybox:latest"
# a container that stops at once when asked (a restore stops and starts it: its grace
# period is not the archive's throughput)
COMPOSE = (f"services:\n  app:\n    image: {IMAGE}\n    command: [sh, -c, \"trap 'exit 0' TERM; sleep 100000 & wait\"]\n"
           "    volumes: ['data:/data']\nvolumes:\n  data: {}\n")
KEYS = {"aws_access_key_id": "bench", "aws_secret_access_key": "bench-secret", "region_name": "us-east-1"}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def podman(*args: str, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(["podman", *args], capture_output=True, timeout=3600, **kw)
    if done.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)}: {done.stderr.decode(errors='replace').strip()}")
    return done


def moto_server():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(endpoint, timeout=2)
            return proc, endpoint
        except httpx.TransportError:
            if time.monotonic() > deadline:
                stop(proc)
                raise RuntimeError("moto's S3 server did not start")
            time.sleep(0.1)


def wait(client, path: str, done) -> dict:
    while True:
        backup = client.get(path).json()
        if done(backup):
            return backup
        time.sleep(0.05)


def mountpoint(volume: str) -> str:
    return podman("volume", "inspect", volume, "--format", "{{.Mountpoint}}").stdout.decode().strip()


def by_hand_backup(s3, bucket: str, volume: str) -> float:
    """``tar -c`` of the volume's folder (on the host, as the engine's user) into an S3 upload."""
    start = time.perf_counter()
    tar = subprocess.Popen(["tar", "-cf", "-", "-C", mountpoint(volume), "."], stdout=subprocess.PIPE)
    s3.upload_fileobj(tar.stdout, bucket, "by-hand.tar")
    if tar.wait() != 0:
        raise RuntimeError("tar -c failed")
    return time.perf_counter() - start


def by_hand_restore(s3, bucket: str, volume: str) -> float:
    """The object downloaded into ``tar -x`` in the emptied volume folder."""
    start = time.perf_counter()
    folder = mountpoint(volume)
    for name in os.listdir(folder):
        subprocess.run(["rm", "-rf", os.path.join(folder, name)], check=True)
    tar = subprocess.Popen(["tar", "-xf", "-", "-C", folder], stdin=subprocess.PIPE)
    s3.download_fileobj(bucket, "by-hand.tar", tar.stdin)
    tar.stdin.close()
    if tar.wait() != 0:
        raise RuntimeError("tar -x failed")
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.backups", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=1024, help="MB of random data in the volume (1024)")
    args = parser.parse_args(argv)
    moto, endpoint = moto_server()
    bucket = f"bench-{uuid.uuid4().hex[:10]}"
    s3 = boto3.session.Session().client("s3", endpoint_url=endpoint, config=Config(s3={"addressing_style": "path"}),
                                        **KEYS)
    s3.create_bucket(Bucket=bucket)
    destination = {"kind": "s3", "endpoint": endpoint, "bucket": bucket, "prefix": "slipway",
                   "region": KEYS["region_name"], "access_key_id": KEYS["aws_access_key_id"],
                   "secret_access_key": KEYS["aws_secret_access_key"]}
    report = {"mb": args.mb}
    try:
        with tempfile.TemporaryDirectory(prefix="slipway-bench-backups-") as work:
            env = dict(os.environ, SLIPWAY_DATABASE_URL=f"sqlite:///{work}/bench.db", SLIPWAY_BILLING_INTERVAL="0",
                       SLIPWAY_BACKUP_DIR=f"{work}/backups", SLIPWAY_WORK_DIR=f"{work}/work",
                       SLIPWAY_RUNTIME_HELPER_IMAGE=IMAGE, SLIPWAY_BACKUP_DESTINATIONS=json.dumps({"s3": destination}),
                       SLIPWAY_BACKUP_DEFAULT="s3")
            cli(env, "init")
            key = cli(env, "apikey", "create", "--name", "bench", "--role", "admin", "--rate-limit-rpm", "100000")["key"]
            with uvicorn("app.asgi:app", env) as base, httpx.Client(
                    base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as client:
                customer = client.post("/api/customers", json={"name": "bench"}).json()["id"]
                service = client.post("/api/services", json={
                    "name": f"bench-{uuid.uuid4().hex[:8]}", "customer_id": customer, "deploy_method": "compose",
                    "compose": COMPOSE}).json()["id"]
                try:
                    if wait(client, f"/api/services/{service}",
                            lambda s: s["status"] in ("running", "failed"))["status"] != "running":
                        raise RuntimeError(client.get(f"/api/services/{service}/events").text)
                    volume = f"slw-{service}-data"
                    log(f"filling {volume} with {args.mb} MB")
                    podman("run", "--rm", "-v", f"{volume}:/data", IMAGE, "sh", "-c",
                           f"dd if=/dev/urandom of=/data/random.bin bs=1048576 count={args.mb} 2>/dev/null")
                    backups = f"/api/services/{service}/backups"

                    log("Slipway: backup to s3")
                    start = time.perf_counter()
                    path = f"{backups}/{client.post(backups).json()['id']}"
                    done = wait(client, path, lambda b: b["status"] in ("completed", "failed"))
                    report["slipway_backup_s"] = time.perf_counter() - start
                    if done["status"] != "completed":
                        raise RuntimeError(done["error"])
                    report["archive_mb"] = done["size_bytes"] / 1e6
                    log("Slipway: restore from s3")
                    start = time.perf_counter()
                    client.post(f"{path}/restore").raise_for_status()
                    done = wait(client, path, lambda b: (b["restore"] or {}).get("status") in ("completed", "failed"))
                    report["slipway_restore_s"] = time.perf_counter() - start
                    if done["restore"]["status"] != "completed":
                        raise RuntimeError(done["restore"]["error"])

                    log("by hand: tar -c | S3 upload")
                    report["tar_backup_s"] = by_hand_backup(s3, bucket, volume)
                    log("by hand: S3 download | tar -x")
                    report["tar_restore_s"] = by_hand_restore(s3, bucket, volume)
                finally:
                    client.delete(f"/api/services/{service}")
    finally:
        stop(moto)
    rows = [("Slipway backup to S3", report["slipway_backup_s"]), ("tar -c | upload (by hand)", report["tar_backup_s"]),
            ("Slipway restore from S3", report["slipway_restore_s"]),
            ("download | tar -x (by hand)", report["tar_restore_s"])]
    print(f"{'':32} {'seconds':>8} {'MB/s':>8}   ({args.mb} MB volume)")
    for label, seconds in rows:
        print(f"{label:32} {seconds:8.2f} {args.mb / seconds:8.1f}")
    for name in ("slipway_backup", "tar_backup", "slipway_restore", "tar_restore"):
        report[f"{name}_mb_s"] = round(args.mb / report[f"{name}_s"], 1)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
