"""Backup and restore throughput to S3 of a volume and of a PostgreSQL database, next to
``tar`` and ``pg_dumpall`` run by hand on the same data in the same run, against a real
engine and a real S3-compatible server (moto's server mode, started here).

    python -m bench backups [--mb 1024] [--pg-mb MB] [--only volume|postgres]
    python -m bench.backups [the same options]

Volume: a compose service with one volume is filled with ``--mb`` MB of random bytes, then:

1. Slipway: ``POST .../backups`` to the ``s3`` destination until ``completed`` (the volume
   exported by the engine, archived and uploaded as one streamed multipart upload), and
   ``POST .../restore`` until ``completed`` (the object read back and checked, the volume
   emptied and filled again);
2. by hand, in the same run on the same data: ``tar -c`` of the volume's folder on the
   host, its output uploaded to the same bucket with boto3's managed upload; then the
   object downloaded (one streamed GET) and piped into ``tar -x`` in the emptied folder (run it as the
   engine's user: root for rootful Podman, or inside ``podman unshare``).

PostgreSQL: a service of the ``postgres`` template (image ``SLIPWAY_TEST_POSTGRES_IMAGE``,
else ``localhost/postgres:latest``) whose database ``app`` gets one table filled inside the
server with ``generate_series`` until ``pg_database_size`` reaches ``--pg-mb`` MB, then:

1. Slipway: a backup to ``s3`` (``pg_dumpall --clean --if-exists`` through exec, streamed
   to S3) and its restore (the dump read back and fed to ``psql`` in the running server),
   each timed from the API request to the job's ``completed`` state;
2. by hand: the same ``pg_dumpall`` through ``podman exec`` into a file, that file
   uploaded to the bucket; then downloaded and loaded back with ``psql`` through
   ``podman exec -i``. The dump alone and the load alone are printed too.

After each restore the table's rows are counted (they must be all there). MB/s are of the
volume's data, and of the database's size before the backup (``pg_database_size``); the
dump's bytes are printed beside it. Prints a table and one JSON line. Needs
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
PG_PATH = 'for d in /usr/lib/postgresql/*/bin; do [ -d "$d" ] && PATH="$d:$PATH"; done; export PATH; '
# one row: a bigint key and 96 characters of hex text (about 160 bytes on disk with its
# tuple header and its share of the primary key's index)
FILL = ("insert into bench select i, md5(i::text) || md5((i + 1)::text) || md5((i + 2)::text) "
        "from generate_series({start}, {end}) as i")
MB = 1024 * 1024


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


def wait(client, path: str, done, seconds: float = 3600) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        item = client.get(path).json()
        if done(item):
            return item
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path}: still {item} after {seconds:.0f} s")
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


def download(s3, bucket: str, key: str, out) -> None:
    """The object as one streamed GET into ``out`` (as ``curl`` would). Not boto3's managed
    download: its parallel ranged GETs are ten times slower against moto's server, which
    would make the baseline, not Slipway, the slow one."""
    for chunk in s3.get_object(Bucket=bucket, Key=key)["Body"].iter_chunks(MB):
        out.write(chunk)


def by_hand_restore(s3, bucket: str, volume: str) -> float:
    """The object downloaded into ``tar -x`` in the emptied volume folder."""
    start = time.perf_counter()
    folder = mountpoint(volume)
    for name in os.listdir(folder):
        subprocess.run(["rm", "-rf", os.path.join(folder, name)], check=True)
    tar = subprocess.Popen(["tar", "-xf", "-", "-C", folder], stdin=subprocess.PIPE)
    download(s3, bucket, "by-hand.tar", tar.stdin)
    tar.stdin.close()
    if tar.wait() != 0:
        raise RuntimeError("tar -x failed")
    return time.perf_counter() - start


class Panel:
    """The Slipway server of the run and its API client: services, backups, restores."""

    def __init__(self, client, customer: str):
        self.client, self.customer = client, customer

    def service(self, **body) -> str:
        created = self.client.post("/api/services", json={"name": f"bench-{uuid.uuid4().hex[:8]}",
                                                          "customer_id": self.customer, **body})
        if created.status_code != 201:
            raise RuntimeError(f"POST /api/services: {created.status_code} {created.text}")
        service = created.json()["id"]
        if wait(self.client, f"/api/services/{service}", lambda s: s["status"] in ("running", "failed"),
                600)["status"] != "running":
            raise RuntimeError(self.client.get(f"/api/services/{service}/events").text)
        return service

    def backup(self, service: str) -> tuple[float, dict]:
        """Seconds from ``POST .../backups`` to ``completed``, and the backup."""
        backups = f"/api/services/{service}/backups"
        start = time.perf_counter()
        accepted = self.client.post(backups)
        accepted.raise_for_status()
        done = wait(self.client, f"{backups}/{accepted.json()['id']}", lambda b: b["status"] in ("completed", "failed"))
        seconds = time.perf_counter() - start
        if done["status"] != "completed":
            raise RuntimeError(done["error"])
        return seconds, done

    def restore(self, service: str, backup: dict) -> float:
        """Seconds from ``POST .../restore`` to the restore's ``completed``."""
        path = f"/api/services/{service}/backups/{backup['id']}"
        start = time.perf_counter()
        self.client.post(f"{path}/restore").raise_for_status()
        done = wait(self.client, path, lambda b: (b["restore"] or {}).get("status") in ("completed", "failed"))
        seconds = time.perf_counter() - start
        if done["restore"]["status"] != "completed":
            raise RuntimeError(done["restore"]["error"])
        return seconds


def run_volume(panel: Panel, s3, bucket: str, mb: int) -> dict:
    service = panel.service(deploy_method="compose", compose=COMPOSE)
    report = {"mb": mb}
    try:
        volume = f"slw-{service}-data"
        log(f"volume: filling {volume} with {mb} MB")
        podman("run", "--rm", "-v", f"{volume}:/data", IMAGE, "sh", "-c",
               f"dd if=/dev/urandom of=/data/random.bin bs=1048576 count={mb} 2>/dev/null")
        log("volume: Slipway backup to s3")
        report["slipway_backup_s"], backup = panel.backup(service)
        report["archive_mb"] = round(backup["size_bytes"] / MB, 1)
        log("volume: Slipway restore from s3")
        report["slipway_restore_s"] = panel.restore(service, backup)
        log("volume: by hand: tar -c | S3 upload")
        report["by_hand_backup_s"] = by_hand_backup(s3, bucket, volume)
        log("volume: by hand: S3 download | tar -x")
        report["by_hand_restore_s"] = by_hand_restore(s3, bucket, volume)
    finally:
        panel.client.delete(f"/api/services/{service}")
    return report


def psql(container: str, sql: str, db: str = "app") -> str:
    """``sql`` run by ``psql`` as ``postgres`` in the container (local trust), its output."""
    return podman("exec", "-u", "postgres", container, "sh", "-c",
                  PG_PATH + f'exec psql -X -At -q -v ON_ERROR_STOP=1 -d {db} -c "$1"', "sh", sql
                  ).stdout.decode().strip()


def fill(container: str, mb: int) -> int:
    """Rows inserted in steps until ``pg_database_size`` of ``app`` reaches ``mb`` MB; the rows."""
    psql(container, "create table bench (id bigint primary key, payload text not null)")
    rows, per_mb = 0, 6500  # a first guess, corrected by what each step measures
    base = int(psql(container, "select pg_database_size('app')"))
    while True:
        size = int(psql(container, "select pg_database_size('app')"))
        if size >= mb * MB:
            return rows
        if rows:
            per_mb = max(1000, int(rows / max((size - base) / MB, 1)))
        step = min(max(1, int((mb * MB - size) / MB * per_mb)) + 100, 2_000_000)
        psql(container, FILL.format(start=rows + 1, end=rows + step))
        rows += step
        log(f"postgres: {rows} rows, {size / MB:.0f} MB before this step")


def pg_count(container: str) -> int:
    return int(psql(container, "select count(*) from bench"))


def by_hand_dump(s3, bucket: str, container: str, path: str) -> tuple[float, float]:
    """``pg_dumpall`` (the options Slipway uses) through ``podman exec`` into a file, then
    the file uploaded: (seconds of the dump, seconds of both)."""
    start = time.perf_counter()
    with open(path, "wb") as out:
        done = subprocess.run(["podman", "exec", "-u", "postgres", container, "sh", "-c",
                               PG_PATH + "exec pg_dumpall -U postgres --clean --if-exists"],
                              stdout=out, stderr=subprocess.PIPE, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"pg_dumpall: {done.stderr.decode(errors='replace')}")
    dumped = time.perf_counter() - start
    s3.upload_file(path, bucket, "by-hand.sql")
    return dumped, time.perf_counter() - start


def by_hand_load(s3, bucket: str, container: str, path: str) -> tuple[float, float]:
    """The dump downloaded from S3 into a file, then loaded with ``psql`` through
    ``podman exec -i`` (its own sessions closed first, as Slipway does): (seconds of the
    load, seconds of both)."""
    start = time.perf_counter()
    os.remove(path)
    with open(path, "wb") as out:
        download(s3, bucket, "by-hand.sql", out)
    loading = time.perf_counter()
    psql(container, "select pg_terminate_backend(pid) from pg_stat_activity "
                    "where pid <> pg_backend_pid() and backend_type = 'client backend'", "postgres")
    with open(path, "rb") as dump:
        done = subprocess.run(["podman", "exec", "-i", "-u", "postgres", container, "sh", "-c",
                               PG_PATH + "exec psql -X -q -d postgres"],
                              stdin=dump, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"psql: {done.stderr.decode(errors='replace')[-2000:]}")
    end = time.perf_counter()
    return end - loading, end - start


def run_postgres(panel: Panel, s3, bucket: str, mb: int, work: str) -> dict:
    image = os.environ.get("SLIPWAY_TEST_POSTGRES_IMAGE") or "localhost/postgres:latest"
    service = panel.service(deploy_method="template", template_id="postgres", variables={"IMAGE": image})
    try:
        [container] = podman("ps", "-q", "--filter", f"label=slipway.service={service}",
                             "--filter", "label=slipway.component=db").stdout.decode().split()
        deadline = time.monotonic() + 120
        while subprocess.run(["podman", "exec", "-u", "postgres", container, "sh", "-c",
                              PG_PATH + "pg_isready -q"], capture_output=True).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError("postgres does not answer")
            time.sleep(0.2)
        log(f"postgres: filling the database app with {mb} MB ({image})")
        start = time.perf_counter()
        rows = fill(container, mb)
        psql(container, "vacuum analyze bench")
        report = {"image": image, "rows": rows, "fill_s": round(time.perf_counter() - start, 1),
                  "database_mb": round(int(psql(container, "select pg_database_size('app')")) / MB, 1)}
        log(f"postgres: {rows} rows, {report['database_mb']} MB; Slipway backup to s3")
        report["slipway_backup_s"], backup = panel.backup(service)
        report["dump_mb"] = round(backup["size_bytes"] / MB, 1)
        log("postgres: Slipway restore from s3")
        report["slipway_restore_s"] = panel.restore(service, backup)
        if pg_count(container) != rows:
            raise RuntimeError(f"Slipway's restore holds {pg_count(container)} rows, not {rows}")
        path = os.path.join(work, "by-hand.sql")
        log("postgres: by hand: pg_dumpall > file, upload")
        report["pg_dumpall_s"], report["by_hand_backup_s"] = by_hand_dump(s3, bucket, container, path)
        report["by_hand_dump_mb"] = round(os.path.getsize(path) / MB, 1)
        log("postgres: by hand: download, psql < file")
        report["psql_load_s"], report["by_hand_restore_s"] = by_hand_load(s3, bucket, container, path)
        if pg_count(container) != rows:
            raise RuntimeError(f"the load by hand holds {pg_count(container)} rows, not {rows}")
    finally:
        panel.client.delete(f"/api/services/{service}")
    return report


def run_backups(args) -> dict:
    moto, endpoint = moto_server()
    bucket = f"bench-{uuid.uuid4().hex[:10]}"
    s3 = boto3.session.Session().client("s3", endpoint_url=endpoint, config=Config(s3={"addressing_style": "path"}),
                                        **KEYS)
    s3.create_bucket(Bucket=bucket)
    destination = {"kind": "s3", "endpoint": endpoint, "bucket": bucket, "prefix": "slipway",
                   "region": KEYS["region_name"], "access_key_id": KEYS["aws_access_key_id"],
                   "secret_access_key": KEYS["aws_secret_access_key"]}
    report = {}
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
                panel = Panel(client, client.post("/api/customers", json={"name": "bench"}).json()["id"])
                if args.only in (None, "volume"):
                    report["volume"] = run_volume(panel, s3, bucket, args.mb)
                if args.only in (None, "postgres"):
                    report["postgres"] = run_postgres(panel, s3, bucket, args.pg_mb, work)
    finally:
        stop(moto)
    return report


def _rate(mb: float, seconds: float) -> float:
    return round(mb / seconds, 1)


def print_backups(report: dict) -> None:
    """The table (seconds and MB/s of each, side by side) and one JSON line."""
    print(f"{'':40} {'seconds':>8} {'MB/s':>8}")
    volume = report.get("volume")
    if volume:
        mb = volume["mb"]
        print(f"volume: {mb} MB of random bytes (MB/s of those; Slipway's archive {volume['archive_mb']} MB)")
        rows = [("Slipway backup to S3", "slipway_backup_s"), ("tar -c | upload (by hand)", "by_hand_backup_s"),
                ("Slipway restore from S3", "slipway_restore_s"), ("download | tar -x (by hand)", "by_hand_restore_s")]
        for label, key in rows:
            volume[key[:-2] + "_mb_s"] = _rate(mb, volume[key])
            print(f"  {label:38} {volume[key]:8.2f} {_rate(mb, volume[key]):8.1f}")
    pg = report.get("postgres")
    if pg:
        mb = pg["database_mb"]
        print(f"postgres: pg_database_size {mb} MB, {pg['rows']} rows (MB/s of that size; "
              f"Slipway's dump {pg['dump_mb']} MB, the dump by hand {pg['by_hand_dump_mb']} MB)")
        rows = [("Slipway backup to S3", "slipway_backup_s"), ("pg_dumpall > file (by hand)", "pg_dumpall_s"),
                ("pg_dumpall > file, upload (by hand)", "by_hand_backup_s"),
                ("Slipway restore from S3", "slipway_restore_s"), ("psql < file (by hand)", "psql_load_s"),
                ("download, psql < file (by hand)", "by_hand_restore_s")]
        for label, key in rows:
            pg[key[:-2] + "_mb_s"] = _rate(mb, pg[key])
            print(f"  {label:38} {pg[key]:8.2f} {_rate(mb, pg[key]):8.1f}")
    for part in (volume, pg):
        for key, value in list((part or {}).items()):
            if key.endswith("_s") and isinstance(value, float):
                part[key] = round(value, 2)
    print(json.dumps(report))


def add_arguments(parser) -> None:
    parser.add_argument("--mb", type=int, default=1024, help="MB of random data in the volume (1024)")
    parser.add_argument("--pg-mb", type=int, default=None,
                        help="MB the PostgreSQL database is filled to (pg_database_size; default: --mb)")
    parser.add_argument("--only", choices=["volume", "postgres"], default=None, help="one of the two (both)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.backups", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.pg_mb is None:
        args.pg_mb = args.mb
    if min(args.mb, args.pg_mb) < 1:
        parser.error("--mb and --pg-mb must be >= 1")
    print_backups(run_backups(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
