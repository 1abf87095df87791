"""Backup destinations (``ports.backups``) and the archive format over them, against a
real S3-compatible server (moto's server mode, ``tests/support/s3.py``) and a real
folder: what is streamed in comes back, a failed or interrupted stream leaves no object,
a changed byte fails verification with the reason, and the settings that name
destinations stop start-up when they are wrong, naming the setting."""
from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile

import pytest

from app.composition import Composition
from app.config import Config, ConfigError
from app.storage.backup_archives import ArchiveError, BackupArchives
from plugins.backup_local import LocalFactory
from plugins.backup_s3 import PART, S3Factory
from ports.backups import DestinationError
from ports.settings import Settings
from tests.support.processes import free_port
from tests.support.s3 import s3_bucket, s3_server  # noqa: F401 (fixtures)

KEY = "cus_a/svc_b/bkp_c.tar"


def _s3(bucket, **options):
    return S3Factory().create(Settings({**bucket.destination(), "name": "offsite", **options}))


def _local(tmp_path):
    return LocalFactory().create(Settings({"kind": "local", "path": str(tmp_path / "backups"), "name": "local"}))


@pytest.fixture(params=["s3", "local"])
def place(request, tmp_path):
    if request.param == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        return _s3(bucket), bucket
    return _local(tmp_path), None


def _broken(data: bytes):
    yield data
    raise RuntimeError("the volume export broke")


def test_an_archive_streams_in_and_back_out_with_its_checksum(place):
    destination, bucket = place
    archives = BackupArchives({destination.name: destination}, destination.name)
    big = os.urandom(PART + PART // 2)  # more than one upload part, several segments
    done = []
    size, digest = archives.write(destination.name, KEY, {"backup_id": "bkp_c"},
                                  [("data", "volumes", iter([big[:1000], big[1000:]])),
                                   ("db", "postgres", iter([b"-- dump\n"])), ("empty", "volumes", iter(()))],
                                  done.append)
    assert done == [0, 1, 2]
    stored = bucket.read(f"backups/{KEY}") if bucket else open(destination.path(KEY), "rb").read()
    assert (size, digest) == (len(stored), hashlib.sha256(stored).hexdigest())
    with tarfile.open(fileobj=io.BytesIO(stored)) as tar:  # plain tar: readable by hand
        names = tar.getnames()
        assert names[-1] == "manifest.json" and names[0] == "parts/0/000000"
        assert b"".join(tar.extractfile(n).read() for n in names if n.startswith("parts/0/")) == big
        manifest = json.loads(tar.extractfile("manifest.json").read())
    assert manifest["format"] == 2 and manifest["backup_id"] == "bkp_c"
    assert [(p["name"], p["kind"], p["member"], p["size_bytes"]) for p in manifest["parts"]] == [
        ("data", "volumes", "parts/0", len(big)), ("db", "postgres", "parts/1", 8), ("empty", "volumes", "parts/2", 0)]
    read = archives.verify(destination.name, KEY, digest)
    assert read["parts"] == manifest["parts"]
    for part, expected in zip(read["parts"], (big, b"-- dump\n", b"")):
        assert b"".join(archives.part_chunks(destination.name, KEY, part)) == expected
    archives.remove(destination.name, KEY)
    assert not destination.exists(KEY)
    with pytest.raises(ArchiveError, match="missing"):
        archives.verify(destination.name, KEY, digest)


def test_a_stream_that_fails_leaves_no_object(place):
    destination, bucket = place
    archives = BackupArchives({destination.name: destination}, destination.name)
    with pytest.raises(RuntimeError, match="broke"):
        archives.write(destination.name, KEY, {}, [("data", "volumes", _broken(os.urandom(PART * 2 + 5)))])
    assert not destination.exists(KEY)
    if bucket:
        assert bucket.keys() == [] and bucket.uploads() == []  # the multipart upload was aborted
    else:
        assert not os.path.exists(destination.path(KEY) + ".part")


def test_a_changed_byte_fails_verification_with_the_reason(place):
    destination, bucket = place
    archives = BackupArchives({destination.name: destination}, destination.name)
    size, digest = archives.write(destination.name, KEY, {}, [("data", "volumes", iter([os.urandom(4096)]))])
    stored = bytearray(bucket.read(f"backups/{KEY}") if bucket else open(destination.path(KEY), "rb").read())
    stored[700] ^= 0xFF  # inside the data of the first member
    if bucket:
        bucket.write(f"backups/{KEY}", bytes(stored))
    else:
        with open(destination.path(KEY), "wb") as f:
            f.write(stored)
    with pytest.raises(ArchiveError, match=f"damaged: its SHA-256 is {hashlib.sha256(stored).hexdigest()}, "
                                           f"the backup recorded {digest}"):
        archives.verify(destination.name, KEY, digest)


def test_a_service_prefix_is_removed_at_every_destination(s3_bucket, tmp_path):
    s3, local = _s3(s3_bucket), _local(tmp_path)
    archives = BackupArchives({"offsite": s3, "local": local})
    for name in ("offsite", "local"):
        for key in (KEY, "cus_a/svc_b/bkp_d.tar", "cus_a/svc_other/bkp_e.tar"):
            archives.write(name, key, {}, [("data", "volumes", iter([b"x"]))])
    archives.remove_service("cus_a/svc_b/")
    assert s3_bucket.keys() == ["backups/cus_a/svc_other/bkp_e.tar"]
    assert os.listdir(tmp_path / "backups" / "cus_a") == ["svc_other"]


def test_an_unreachable_endpoint_is_a_destination_error():
    bucket = type("B", (), {"destination": lambda self: {"kind": "s3", "endpoint": f"http://127.0.0.1:{free_port()}",
                                                          "bucket": "b", "access_key_id": "k",
                                                          "secret_access_key": "s"}})()
    destination = _s3(bucket)
    with pytest.raises(DestinationError, match="offsite .*cannot start uploading .*Could not connect"):
        destination.put(KEY, iter([b"x"]))


@pytest.mark.parametrize("value, words", [
    ("{", "SLIPWAY_BACKUP_DESTINATIONS is not JSON"),
    ("[]", "SLIPWAY_BACKUP_DESTINATIONS must be a JSON object"),
    ('{"Bad Name": {"kind": "s3"}}', "not a destination name"),
    ('{"x": {"bucket": "b"}}', 'must be an object with a "kind"'),
    ('{"x": {"kind": "s3", "bucket": 3}}', "must be strings"),
])
def test_bad_destinations_json_stops_start_up(value, words):
    with pytest.raises(ConfigError, match="SLIPWAY_BACKUP_DESTINATIONS") as raised:
        Config.from_env({"SLIPWAY_BACKUP_DESTINATIONS": value})
    assert words in str(raised.value)


@pytest.mark.parametrize("destinations, default, words", [
    ({"x": {"kind": "tape"}}, "local", "SLIPWAY_BACKUP_DESTINATIONS: no loaded plugin provides 'tape'"),
    ({"x": {"kind": "s3"}}, "local", 'SLIPWAY_BACKUP_DESTINATIONS: .*needs "bucket"'),
    ({"x": {"kind": "s3", "bucket": "b", "endpoint": "ftp://h"}}, "local", "SLIPWAY_BACKUP_DESTINATIONS: .*endpoint"),
    ({"x": {"kind": "s3", "bucket": "b", "colour": "red"}}, "local", "SLIPWAY_BACKUP_DESTINATIONS: .*unknown option"),
    ({"x": {"kind": "s3", "bucket": "b", "access_key_id": "k"}}, "local", "SLIPWAY_BACKUP_DESTINATIONS: .*both"),
    ({"local": {"kind": "s3", "bucket": "b"}}, "local", "SLIPWAY_BACKUP_DESTINATIONS: \"local\" is built in"),
    ({}, "offsite", "SLIPWAY_BACKUP_DEFAULT: no backup destination 'offsite'"),
])
def test_bad_destinations_stop_start_up_naming_the_setting(tmp_path, destinations, default, words):
    config = Config(database_url="sqlite:///:memory:", backup_dir=str(tmp_path / "b"),
                    backup_destinations=destinations, backup_default=default)
    with pytest.raises(ConfigError, match=words):
        Composition(config).backup_archives  # noqa: B018 - builds it: the setting is read and refused


def test_defaults_and_a_good_configuration(tmp_path, s3_bucket):
    config = Config.from_env({"SLIPWAY_BACKUP_DIR": str(tmp_path / "b")})
    assert (config.backup_destinations, config.backup_default) == ({}, "local")
    config = Config.from_env({"SLIPWAY_BACKUP_DIR": str(tmp_path / "b"), "SLIPWAY_BACKUP_DEFAULT": "offsite",
                              "SLIPWAY_BACKUP_DESTINATIONS": s3_bucket.destinations_json("offsite")})
    archives = Composition(config).backup_archives
    assert archives.names() == ["local", "offsite"] and archives.default == "offsite"
    assert archives.destination("offsite").describe() == f"s3://{s3_bucket.name}/backups at {s3_bucket.server.endpoint}"


def test_an_archive_made_before_destinations_is_still_read_and_removed(tmp_path):
    """Format 1 (one member ``volumes/<n>.tar`` per volume, the manifest's ``volumes``),
    where it was written then: ``<SLIPWAY_BACKUP_DIR>/<service id>/<backup id>.tar``."""
    local = _local(tmp_path)
    archives = BackupArchives({"local": local})
    volume = os.urandom(3000)
    manifest = {"format": 1, "volumes": [{"name": "data", "member": "volumes/0.tar", "size_bytes": len(volume),
                                          "sha256": hashlib.sha256(volume).hexdigest()}]}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in (("volumes/0.tar", volume), ("manifest.json", json.dumps(manifest).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    old = tmp_path / "backups" / "svc_b" / "bkp_c.tar"
    old.parent.mkdir(parents=True)
    old.write_bytes(buffer.getvalue())
    read = archives.verify("local", KEY, hashlib.sha256(buffer.getvalue()).hexdigest())
    assert [(p["name"], p["kind"], p["member"]) for p in read["parts"]] == [("data", "volumes", "volumes/0.tar")]
    assert b"".join(archives.part_chunks("local", KEY, read["parts"][0])) == volume
    archives.remove("local", KEY)
    assert not old.exists()
    old.parent.mkdir(parents=True)
    old.write_bytes(buffer.getvalue())
    archives.remove_service("cus_a/svc_b/")
    assert not old.parent.exists()


def _in_chunks(data: bytes, size: int):
    return (data[i:i + size] for i in range(0, len(data), size))


@pytest.mark.parametrize("sizes", [(0,), (1,), (1023,), (1024,), (1025,), (3 * 1024 + 7, 0, 2048)])
def test_parts_split_into_segments_at_any_size(tmp_path, sizes):
    """Parts of any size, in chunks of any size, split into segments of at most
    ``segment`` bytes, read back whole (here with 1 KiB segments)."""
    from app.storage.backup_archives import ArchiveWriter

    local = _local(tmp_path)
    archives = BackupArchives({"local": local})
    datas = [os.urandom(n) for n in sizes]
    parts = [(f"p{i}", "volumes", _in_chunks(d, 700)) for i, d in enumerate(datas)]
    writer = ArchiveWriter({}, parts, segment=1024)
    size, digest = local.put(KEY, writer.chunks())
    assert size == writer.offset + 2 * 512 + (-(writer.offset + 1024) % tarfile.RECORDSIZE)
    manifest = archives.verify("local", KEY, digest)
    with tarfile.open(local.path(KEY)) as tar:
        assert all(m.size <= 1024 for m in tar.getmembers() if m.name.startswith("parts/"))
    for part, data in zip(manifest["parts"], datas):
        assert part["size_bytes"] == len(data) and part["sha256"] == hashlib.sha256(data).hexdigest()
        assert b"".join(archives.part_chunks("local", KEY, part)) == data


def test_a_destination_error_never_shows_the_keys():
    """Whatever a service or boto3 puts in an error (here the URL, holding a bucket named
    like the access key), the keys become ``***``."""
    bucket = type("B", (), {"destination": lambda self: {"kind": "s3", "endpoint": f"http://127.0.0.1:{free_port()}",
                                                          "bucket": "akid-of-the-operator",
                                                          "access_key_id": "akid-of-the-operator",
                                                          "secret_access_key": "secret-of-the-operator"}})()
    with pytest.raises(DestinationError) as raised:
        _s3(bucket).put(KEY, iter([b"x"]))
    assert "akid-of-the-operator" not in str(raised.value) and "/***" in str(raised.value)
