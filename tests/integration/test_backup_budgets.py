"""Backups, restores and verifications within their budgets, on real Podman through a
real server: components labelled ``slipway.backup: mysql`` whose image is busybox and
whose ``mysqldump`` (and ``mysql``) the container writes itself, as a customer may: one
that never ends, one that writes more than the size budget, one that ends at once.

- One customer's stuck dump holds up neither another customer's backup nor the worker
  once its time budget (``SLIPWAY_BACKUP_TIMEOUT``) is spent; a second job of the stuck
  customer waits meanwhile (one job per customer at a time).
- Past ``SLIPWAY_BACKUP_MAX_MB`` read (a dump, a volume holding a huge sparse file) the
  backup is ``failed`` naming the setting, and nothing of it stays at the destination.
- A delete ends its service's running restore (``service deleted``) and frees the worker.
- A verification runs the image the backed-up release ran, whatever the compose names
  or the tag points to later.
"""
from __future__ import annotations

import os
import time

import pytest

from tests.support.engine import engine_for, engine_settings
from tests.support.panel_server import _until, admin_key, serve_panel

pytestmark = pytest.mark.runtime
BUSYBOX = "localhost/busybox:latest"


def _mysql_like(dump: str, *, load: str = "cat >/dev/null", volume: str = "", image: str = BUSYBOX) -> str:
    """A compose of one component ``db`` labelled ``slipway.backup: mysql`` whose container
    writes its own ``mysqldump`` (running ``dump``), ``mysql`` (``load``) and ``mysqladmin``;
    with ``volume``, a second component ``files`` whose volume that shell command fills."""
    script = (f"printf '#!/bin/sh\\n{dump}\\n' > /bin/mysqldump && printf '#!/bin/sh\\n{load}\\n' > /bin/mysql && "
              "printf '#!/bin/sh\\nexit 0\\n' > /bin/mysqladmin && chmod +x /bin/mysqldump /bin/mysql /bin/mysqladmin "
              "&& exec sleep 100000")
    compose = f"""
services:
  db:
    image: {image}
    labels:
      slipway.backup: mysql
    command: ["sh", "-c", "{script}"]
"""
    if volume:
        compose += f"""
  files:
    image: {BUSYBOX}
    command: ["sh", "-c", "{volume} && exec sleep 100000"]
    volumes:
      - files:/files
volumes:
  files: {{}}
"""
    return compose


HANGS = _mysql_like("exec sleep 100000")
QUICK = _mysql_like('echo \\"-- Dump completed\\"')
HUGE = _mysql_like("head -c 3000000 /dev/zero")
SPARSE = _mysql_like('echo \\"-- Dump completed\\"',
                     volume="truncate -s 10G /files/sparse 2>/dev/null || dd if=/dev/zero of=/files/sparse bs=1 "
                            "count=0 seek=10737418240")
QUICK_SLOW_LOAD = _mysql_like('echo \\"-- Dump completed\\"', load="exec sleep 100000")


class Panel:
    def __init__(self, client, engine, backup_dir, made):
        self.client, self.engine, self.backup_dir, self.made = client, engine, backup_dir, made

    def customer(self, name: str) -> str:
        created = self.client.post("/api/customers", json={"name": f"{name}-{time.monotonic_ns() % 10**8}"})
        assert created.status_code == 201, created.text
        return created.json()["id"]

    def service(self, customer_id: str, compose: str, prefix: str = "bk") -> str:
        created = self.client.post("/api/services", json={
            "name": f"{prefix}-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": customer_id,
            "deploy_method": "compose", "compose": compose})
        assert created.status_code == 201, created.text
        service_id = created.json()["id"]
        self.made.append(service_id)
        _until(self.client, service_id, "running", seconds=180)
        return service_id

    def backup(self, service_id: str) -> str:
        accepted = self.client.post(f"/api/services/{service_id}/backups")
        assert accepted.status_code == 202, accepted.text
        return accepted.json()["id"]

    def get(self, service_id: str, backup_id: str) -> dict:
        answer = self.client.get(f"/api/services/{service_id}/backups/{backup_id}")
        assert answer.status_code == 200, answer.text
        return answer.json()

    def until(self, service_id: str, backup_id: str, done, seconds: float = 120) -> dict:
        """The backup once ``done(backup)`` holds (polled), within ``seconds``."""
        deadline = time.monotonic() + seconds
        while True:
            backup = self.get(service_id, backup_id)
            if done(backup):
                return backup
            assert time.monotonic() < deadline, backup
            time.sleep(0.2)

    def stored(self) -> list:
        """Every file under the ``local`` destination's folder (archives and ``.part`` files)."""
        return sorted(os.path.join(d, f) for d, _, files in os.walk(self.backup_dir) for f in files)


def _status(wanted: str):
    return lambda backup: backup["status"] == wanted


@pytest.fixture
def serve(migrated_database_url, tmp_path, request):
    """``serve(**settings)``: a real server on real Podman with those ``SLIPWAY_BACKUP_*`` settings."""
    runtime_url, engine_ulimits = engine_for(request, "podman")
    key = admin_key(migrated_database_url)
    started = []
    from app.pluginmanager import make_plugin_manager, runtimes

    engine = runtimes(make_plugin_manager())["podman"].create(engine_settings(runtime_url, engine_ulimits))
    engine.helper_image = BUSYBOX
    made: list = []

    def start(**settings) -> Panel:
        backup_dir = tmp_path / f"backups-{len(started)}"
        env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=migrated_database_url,
                   SLIPWAY_RUNTIME="podman", SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_BILLING_INTERVAL="0",
                   SLIPWAY_BACKUP_DIR=str(backup_dir), SLIPWAY_RUNTIME_HELPER_IMAGE=BUSYBOX,
                   SLIPWAY_CUSTOMER_MAX_CPUS="64", SLIPWAY_CUSTOMER_MAX_MEMORY_MB="65536",
                   **{f"SLIPWAY_BACKUP_{name.upper()}": str(value) for name, value in settings.items()})
        server, client = serve_panel(key, env)
        started.append((server, client))
        return Panel(client, engine, backup_dir, made)

    yield start
    for server, client in started:
        client.close()
        server.terminate()
        server.wait(timeout=20)
    for service_id in made:
        engine.remove_service(service_id)


def test_a_stuck_dump_holds_up_neither_another_customer_nor_the_worker(serve):
    """Two workers: A's dump never ends; B's backup completes meanwhile, and A's second
    backup waits (one job per customer) until A's first is ``failed`` past the time budget,
    with nothing at the destination; then it runs."""
    panel = serve(workers=2, timeout=12)
    a, b = panel.customer("a"), panel.customer("b")
    stuck, later, other = panel.service(a, HANGS), panel.service(a, QUICK), panel.service(b, QUICK)

    first = panel.backup(stuck)
    panel.until(stuck, first, _status("running"))
    second = panel.backup(later)
    theirs = panel.backup(other)
    assert panel.until(other, theirs, lambda x: x["status"] in ("completed", "failed"))["status"] == "completed"
    assert panel.get(later, second)["status"] == "pending"  # A's other job waits for A's first
    assert panel.get(stuck, first)["status"] == "running"

    failed = panel.until(stuck, first, lambda x: x["status"] != "running", seconds=60)
    assert (failed["status"], failed["error"]) == ("failed", "took longer than SLIPWAY_BACKUP_TIMEOUT (12 s)")
    assert not [path for path in panel.stored() if first in path]  # no archive, no .part
    assert panel.until(later, second, lambda x: x["status"] in ("completed", "failed"))["status"] == "completed"


def test_past_the_time_budget_the_one_worker_takes_the_next_job(serve):
    panel = serve(workers=1, timeout=3)
    a, b = panel.customer("a"), panel.customer("b")
    stuck, other = panel.service(a, HANGS), panel.service(b, QUICK)
    first = panel.backup(stuck)
    panel.until(stuck, first, _status("running"))
    theirs = panel.backup(other)
    failed = panel.until(stuck, first, lambda x: x["status"] != "running", seconds=30)
    assert (failed["status"], failed["error"]) == ("failed", "took longer than SLIPWAY_BACKUP_TIMEOUT (3 s)")
    assert panel.until(other, theirs, lambda x: x["status"] in ("completed", "failed"))["status"] == "completed"
    assert not [path for path in panel.stored() if first in path]


@pytest.mark.parametrize("compose", [HUGE, SPARSE], ids=["dump", "sparse-volume"])
def test_past_the_size_budget_a_backup_fails_and_leaves_nothing(serve, compose):
    panel = serve(max_mb=1, timeout=120)
    service = panel.service(panel.customer("a"), compose)
    backup = panel.until(service, panel.backup(service), lambda x: x["status"] in ("completed", "failed"))
    assert (backup["status"], backup["error"]) == ("failed", "read more than SLIPWAY_BACKUP_MAX_MB (1 MB)")
    assert not [path for path in panel.stored() if backup["id"] in path]


def _restore_into_new(panel, service: str, backup_id: str) -> str:
    """Queue a restore of the backup into a new service; returns the new service's id."""
    answer = panel.client.post(f"/api/services/{service}/backups/{backup_id}/restore",
                               json={"target": "new", "name": f"copy-{os.getpid()}-{time.monotonic_ns() % 100000}"})
    assert answer.status_code == 202, answer.text
    target = answer.json()["restored_service_id"]
    panel.made.append(target)
    return target


def _restoring(panel, service: str, backup_id: str) -> dict:
    """The backup once its restore runs into a new service that is up (its load hangs)."""
    return panel.until(service, backup_id, lambda x: (x["restore"] or {}).get("status") == "running"
                       and (x["restore"] or {}).get("progress", 0) >= 5, seconds=180)


def test_deleting_the_new_service_ends_its_restore_and_frees_the_worker(serve):
    panel = serve(workers=1, timeout=600)
    a, b = panel.customer("a"), panel.customer("b")
    source, other = panel.service(a, QUICK_SLOW_LOAD), panel.service(b, QUICK)
    made = panel.until(source, panel.backup(source), _status("completed"))
    target = _restore_into_new(panel, source, made["id"])
    _restoring(panel, source, made["id"])
    assert panel.client.delete(f"/api/services/{target}").status_code == 204
    ended = panel.until(source, made["id"], lambda x: x["restore"]["status"] != "running", seconds=15)
    assert (ended["restore"]["status"], ended["restore"]["error"]) == ("failed", "service deleted")
    theirs = panel.backup(other)
    assert panel.until(other, theirs, lambda x: x["status"] in ("completed", "failed"),
                       seconds=30)["status"] == "completed"


def test_deleting_both_services_during_a_restore_frees_the_worker(serve):
    """The issue's run: back up, restore into a new service, delete both while the
    restore runs; a later backup of another customer completes (one worker)."""
    panel = serve(workers=1, timeout=600)
    a, b = panel.customer("a"), panel.customer("b")
    source, other = panel.service(a, QUICK_SLOW_LOAD), panel.service(b, QUICK)
    made = panel.until(source, panel.backup(source), _status("completed"))
    target = _restore_into_new(panel, source, made["id"])
    _restoring(panel, source, made["id"])
    assert panel.client.delete(f"/api/services/{target}").status_code == 204
    assert panel.client.delete(f"/api/services/{source}").status_code == 204
    theirs = panel.backup(other)
    assert panel.until(other, theirs, lambda x: x["status"] in ("completed", "failed"),
                       seconds=30)["status"] == "completed"


def test_deleting_a_service_ends_its_stuck_backup_at_once(serve):
    panel = serve(workers=1, timeout=600)
    a, b = panel.customer("a"), panel.customer("b")
    stuck, other = panel.service(a, HANGS), panel.service(b, QUICK)
    first = panel.backup(stuck)
    panel.until(stuck, first, _status("running"))
    theirs = panel.backup(other)
    assert panel.client.delete(f"/api/services/{stuck}").status_code == 204
    assert panel.until(other, theirs, lambda x: x["status"] in ("completed", "failed"),
                       seconds=30)["status"] == "completed"
    assert not [path for path in panel.stored() if first in path]


def _verifier_image(engine, tmp_path, name: str) -> str:
    """A busybox image, tagged ``localhost/slipway-verify-<name>:<pid>``, whose MariaDB
    tools a verification finds and whose ``mariadb-install-db`` fails saying ``image <name>``."""
    context = tmp_path / f"image-{name}"
    context.mkdir()
    (context / "fails").write_text(f"#!/bin/sh\necho 'this is image {name}'\nexit 1\n")
    (context / "Dockerfile").write_text(
        f"FROM {BUSYBOX}\nCOPY fails /bin/mariadb-install-db\n"
        "RUN chmod 755 /bin/mariadb-install-db && echo 'mysql:x:999:999::/tmp:/bin/sh' >> /etc/passwd && "
        "for c in mariadbd mariadb mariadb-check; do ln -s /bin/true /bin/$c; done\n")
    tag = f"localhost/slipway-verify-{name.lower()}:{os.getpid()}"
    engine.build_image(str(context), tag)
    return tag


def _verified(panel, service: str, backup_id: str) -> dict:
    answer = panel.client.post(f"/api/services/{service}/backups/{backup_id}/verify")
    assert answer.status_code == 202, answer.text
    return panel.until(service, backup_id, lambda x: x["verify_status"] in ("completed", "failed"), seconds=120)


def test_a_verification_runs_the_image_the_backed_up_release_ran(serve, tmp_path):
    """A's release runs image A. A PATCH of the compose to image B (not deployed) before
    the next backup, and a tag of image A pointed at image B's content, change nothing:
    both backups' verifications run image A."""
    panel = serve(timeout=120)
    image_a, image_b = _verifier_image(panel.engine, tmp_path, "A"), _verifier_image(panel.engine, tmp_path, "B")
    try:
        ran = panel.engine.image_id(image_a)
        service = panel.service(panel.customer("a"), _mysql_like('echo \\"-- Dump completed\\"', image=image_a))
        first = panel.until(service, panel.backup(service), _status("completed"))
        patched = panel.client.patch(f"/api/services/{service}",
                                     json={"compose": _mysql_like('echo \\"-- Dump completed\\"', image=image_b)})
        assert patched.status_code == 200, patched.text
        second = panel.until(service, panel.backup(service), _status("completed"))

        verified = _verified(panel, service, second["id"])
        assert verified["verify_status"] == "failed" and "this is image A" in verified["verify_error"], verified
        panel.engine.tag_image(image_b, image_a)  # image A's tag now names image B
        assert panel.engine.image_id(image_a) != ran
        verified = _verified(panel, service, first["id"])
        assert verified["verify_status"] == "failed" and "this is image A" in verified["verify_error"], verified
    finally:
        for tag in (image_a, image_b):
            try:
                panel.engine.remove_image(tag)
            except Exception:  # noqa: BLE001 - in use by a container the teardown removes; the tag is this test's own
                pass
