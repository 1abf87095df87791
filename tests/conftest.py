"""Shared fixtures: a fresh database per test (SQLite by default, PostgreSQL when
``SLIPWAY_DATABASE_URL`` says so; a test's store is a copy of a database migrated once per
test process), a fake clock, the app, and a contract-checking client."""
from __future__ import annotations

import os
import secrets
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.database import (POSTGRES, _reset_postgres, copy_sqlite, drop_database, postgres_template,
                                    reset_from_template, sqlite_template, worker_database)
from tests.support.fakes import FakeClock
from tests.support.partners import World

# The app, its storage and the engine helpers are imported by the fixtures that need them,
# so folders that need none (tests/unit/core) start in milliseconds.


def _keep_bytecode() -> None:
    """Let every Python the tests start (test processes, servers, CLI commands: hundreds
    in a run) reuse compiled bytecode. A machine that sets ``PYTHONDONTWRITEBYTECODE``
    (this one's image does) makes each of them compile Slipway's modules from source
    again: about a third of a CLI command's CPU. The bytecode goes to a folder of the
    machine's temporary directory (``PYTHONPYCACHEPREFIX``), never into the checkout."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    prefix = os.environ.get("PYTHONPYCACHEPREFIX") or os.path.join(tempfile.gettempdir(),
                                                                  f"slipway-tests-pycache-{os.getuid()}")
    os.environ.pop("PYTHONDONTWRITEBYTECODE")
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.pycache_prefix, sys.dont_write_bytecode = prefix, False


_keep_bytecode()

# Nothing that waits on the outside (engine, git, a name lookup, a socket, a process) runs
# inside a database transaction or on a database thread (core.waits): under test such a
# call raises, here and in every server and CLI command the tests start (they inherit it).
os.environ.setdefault("SLIPWAY_STRICT_WAITS", "1")
if os.environ["SLIPWAY_STRICT_WAITS"] == "1":
    from app import waits as _waits

    _waits.configure(True)


def pytest_configure(config):
    """Under pytest-xdist (``-n``), each worker on PostgreSQL gets its own database: the
    variable is rewritten before any test reads it, so servers and CLIs the tests start
    inherit it too."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    # the key of the secret variables, for the servers and CLIs the tests start (a server
    # refuses to start without one; `slipway init` writes no key file while it is set)
    os.environ.setdefault("SLIPWAY_SECRET_KEY", "dGVzdHMtb2Ytc2xpcHdheS1zZWNyZXQta2V5LTMyYnk=")
    # the deploys of real servers settle 1 s (not the operator's 3 s) and drain 0.5 s (not
    # 2 s): busybox containers that exit do so at once, and hundreds of deploys in a run
    # waited the difference (a sixth of the engine tests' time). Tests of the windows
    # themselves set their own, or drive the Clock port (tests/unit/core/test_deploy_steps.py)
    os.environ.setdefault("SLIPWAY_DEPLOY_SETTLE", "1")
    os.environ.setdefault("SLIPWAY_DEPLOY_DRAIN", "0.5")
    if POSTGRES and worker:
        os.environ["SLIPWAY_DATABASE_URL"] = worker_database(os.environ["SLIPWAY_DATABASE_URL"], worker)


@pytest.fixture
def database_url(request, tmp_path):
    """The test's database, empty (no schema): a SQLite file in ``tmp_path``, or the
    process's PostgreSQL database emptied. A test with the ``store`` gets it migrated
    instead (``migrated_database_url``)."""
    if POSTGRES:
        url = os.environ["SLIPWAY_DATABASE_URL"]
        if "migrated_database_url" not in request.fixturenames:  # else made again from the template
            _reset_postgres(url)
        return url
    return f"sqlite:///{tmp_path / 'slipway.db'}"


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory):
    """A database migrated to the latest schema (Slipway's and the plugins' migrations),
    once per test process: a SQLite file, or a PostgreSQL database beside the process's
    own (dropped at the end)."""
    if POSTGRES:
        url = os.environ["SLIPWAY_DATABASE_URL"]
        template = postgres_template(url)
        yield template
        drop_database(url, template)
    else:
        yield sqlite_template(tmp_path_factory.mktemp("template"))


@pytest.fixture
def migrated_database_url(database_url, migrated_template):
    """``database_url``, a copy of the migrated template: the SQLite file copied, the
    PostgreSQL database emptied back to the template's rows when its schema is the
    template's, else created again with ``CREATE DATABASE ... TEMPLATE``
    (``tests.support.database.reset_from_template``)."""
    if POSTGRES:
        reset_from_template(database_url, migrated_template)
    else:
        copy_sqlite(migrated_template, Path(database_url.removeprefix("sqlite:///")))
    return database_url


@pytest.fixture
def store(migrated_database_url):
    from app.storage.store import Store

    store = Store(migrated_database_url, threads=2)
    yield store
    store.close()


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def make_app(store, clock):
    def make(**overrides):
        overrides.setdefault("billing_interval", 0)  # tests drive recomputes themselves
        overrides.setdefault("deploy_worker", False)  # lifespan runs per request in falcon.testing
        # the environment's engine (SLIPWAY_RUNTIME_URL), so creates, redeploys, backups pass
        # the engine's ping (app.engine_gate); nothing deploys without the deploy worker
        overrides.setdefault("runtime_url", os.environ.get("SLIPWAY_RUNTIME_URL") or None)
        from app.config import Config
        from app.factory import create_app

        config = Config(database_url=store.url, clock=clock, **overrides)
        return create_app(config, store=store)

    return make


@pytest.fixture
def app(make_app):
    return make_app()


@pytest.fixture
def client(app):
    from tests.support.contract_client import ContractClient

    return ContractClient(app)


@pytest.fixture
def world(store, clock):
    return World(store, clock)


def _required_url(variable: str, require: str, missing: str) -> str:
    """The URL in ``variable``; without one the test skips (``missing`` says how to get
    one), unless ``require`` is ``1`` (CI), where it fails."""
    url = os.environ.get(variable)
    if not url:
        if os.environ.get(require) == "1":
            pytest.fail(f"{require}=1 but {variable} is not set")
        pytest.skip(f"{missing} (set {variable})")
    return url


@pytest.fixture(scope="session")
def runtime_url():
    """The container engine's socket (``SLIPWAY_RUNTIME_URL``). Without one, tests that
    need it skip, unless ``SLIPWAY_REQUIRE_RUNTIME=1`` (CI), where they fail."""
    return _required_url("SLIPWAY_RUNTIME_URL", "SLIPWAY_REQUIRE_RUNTIME",
                         "no container engine, e.g. from ../shared/tools/podman-service")


@pytest.fixture(scope="session")
def swarm_url():
    """A Docker Swarm manager's socket (``SLIPWAY_TEST_SWARM_URL``, as
    ``../shared/tools/swarm-service`` prints it). Without one, the Swarm tests skip,
    unless ``SLIPWAY_REQUIRE_SWARM=1`` (CI), where they fail."""
    return _required_url("SLIPWAY_TEST_SWARM_URL", "SLIPWAY_REQUIRE_SWARM",
                         "no Docker Swarm, e.g. from ../shared/tools/swarm-service")


def pytest_collection_modifyitems(config, items):
    """Mark storage-sensitive tests: every test on the database fixture that needs no
    container engine, plus those marked ``storage`` by hand (engine or server tests whose
    point is the database). CI runs the whole suite on SQLite and ``-m storage`` on
    PostgreSQL, so engine, browser and proxy tests run once (a browser test's point is the
    page: it is not storage-sensitive unless marked so by hand)."""
    for item in items:
        if item.get_closest_marker("storage") is None and item.get_closest_marker("runtime") is None \
                and item.get_closest_marker("browser") is None and "database_url" in item.fixturenames:
            item.add_marker(pytest.mark.storage)


@pytest.fixture(scope="session")
def engine_ulimits(runtime_url):
    """Ulimits for every test container: ``SLIPWAY_RUNTIME_ULIMITS`` when set, else the
    engine's own limits read from a probe container. Pinning them keeps exec (and so
    healthchecks) working on hosts where the OCI runtime may not raise rlimits, where
    Podman's default nofile/nproc of 1048576 breaks every exec; elsewhere it changes
    nothing a container would not inherit anyway."""
    configured = os.environ.get("SLIPWAY_RUNTIME_ULIMITS")
    if configured is not None:
        return configured
    from ports.runtime import SERVICE_LABEL, ContainerSpec
    from tests.support.engine import BUSYBOX, _factories, wait_for, engine_settings

    probe = _factories()["podman"].create(engine_settings(runtime_url, ""))
    service_id = "svc_test" + secrets.token_hex(4)
    try:
        container = probe.run(ContainerSpec(
            name=f"{service_id}-probe", image=BUSYBOX, labels={SERVICE_LABEL: service_id},
            command=("sh", "-c", 'echo "nofile=$(ulimit -Sn):$(ulimit -Hn) nproc=$(ulimit -Su):$(ulimit -Hu)"')))
        wait_for(lambda: probe.inspect(container).status == "exited", "the ulimit probe to finish")
        text = " ".join(line.message for line in probe.logs(container, tail=None))
    finally:
        probe.remove_service(service_id)
    return text.replace("unlimited", "-1")


@pytest.fixture
def caddy(tmp_path):
    """A real Caddy (tests/support/caddy.py); skipped without a caddy binary unless
    SLIPWAY_REQUIRE_CADDY=1."""
    from tests.support.caddy import running_caddy

    with running_caddy(tmp_path) as running:
        yield running


@pytest.fixture(scope="session")
def redis_url():
    """A Redis for the shared rate store (``SLIPWAY_TEST_REDIS_URL``, default
    ``redis://127.0.0.1:6379/0``). Unreachable, the tests that need it skip, unless
    ``SLIPWAY_REQUIRE_REDIS=1`` (CI), where they fail."""
    import socket
    from urllib.parse import urlsplit

    url = os.environ.get("SLIPWAY_TEST_REDIS_URL") or "redis://127.0.0.1:6379/0"
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname, parts.port or 6379), timeout=2).close()
    except OSError as exc:
        if os.environ.get("SLIPWAY_REQUIRE_REDIS") == "1":
            pytest.fail(f"SLIPWAY_REQUIRE_REDIS=1 but no Redis answers at {url}: {exc}")
        pytest.skip(f"no Redis at {url} (set SLIPWAY_TEST_REDIS_URL)")
    return url
