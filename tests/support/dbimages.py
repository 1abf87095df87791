"""The database images of the tests (built from Debian's packages by
``../shared/tools/debian-image``): their names come from ``SLIPWAY_TEST_POSTGRES_IMAGE``,
``SLIPWAY_TEST_MARIADB_IMAGE`` and ``SLIPWAY_TEST_REDIS_IMAGE``. Without one, a test that
needs it skips, unless ``SLIPWAY_REQUIRE_RUNTIME=1`` (CI), where it fails. Import the
fixtures into a ``conftest.py`` or a test module."""
from __future__ import annotations

import os

import pytest


def _image(variable: str) -> str:
    image = os.environ.get(variable)
    if not image:
        if os.environ.get("SLIPWAY_REQUIRE_RUNTIME") == "1":
            pytest.fail(f"SLIPWAY_REQUIRE_RUNTIME=1 but {variable} is not set")
        pytest.skip(f"no database image (build one with ../shared/tools/debian-image and set {variable})")
    return image


@pytest.fixture(scope="session")
def postgres_image() -> str:
    """Debian's ``postgresql`` (binaries under ``/usr/lib/postgresql/15/bin``, user ``postgres``)."""
    return _image("SLIPWAY_TEST_POSTGRES_IMAGE")


@pytest.fixture(scope="session")
def mariadb_image() -> str:
    """Debian's ``mariadb-server`` and ``mariadb-client``."""
    return _image("SLIPWAY_TEST_MARIADB_IMAGE")


@pytest.fixture(scope="session")
def redis_image() -> str:
    """Debian's ``redis-server`` (with ``redis-cli``)."""
    return _image("SLIPWAY_TEST_REDIS_IMAGE")
