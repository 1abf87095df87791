"""A Dockerfile whose name ends in ``.in`` is never built: Buildah runs such a file
through ``cpp`` (``#include "/etc/passwd"``, ``#define``), so what it builds is not the
text Slipway read. The job fails naming it before any build, and the runtime refuses
to send it."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from plugins.runtime_common.build import BuildContextError, dockerfile_entry
from plugins.source_common.source import SourceError, check_containerfile

INCLUDE = '#include "/etc/passwd"\nFROM busybox\n'


@pytest.mark.parametrize("name", ["Containerfile.in", "docker/Dockerfile.in", "Dockerfile.IN"])
def test_a_dockerfile_named_dot_in_fails_the_job_naming_it(tmp_path, name):
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text(INCLUDE)
    with pytest.raises(SourceError, match=r"services\.app\.build: the Dockerfile .* ends in \.in") as caught:
        check_containerfile(str(tmp_path), name, None, None, service_id="svc_own", where="services.app.build",
                            allow_private=False)
    assert repr(name) in str(caught.value)
    with pytest.raises(BuildContextError, match=r"ends in \.in"):
        dockerfile_entry(str(tmp_path), name)


def test_without_a_name_the_build_is_sent_the_file_it_was_checked_as(tmp_path):
    """No name given: the build is told ``Dockerfile`` or ``Containerfile`` by name, so
    the engine never looks for a ``Containerfile.in`` of its own."""
    (tmp_path / "Containerfile").write_text("FROM busybox\n")
    (tmp_path / "Containerfile.in").write_text(INCLUDE)
    engine = SimpleNamespace(has_image=lambda image: True)  # busybox at hand: nothing to pull
    assert check_containerfile(str(tmp_path), None, None, engine, service_id="svc_own", where="services.app.build",
                               allow_private=False) == "Containerfile"
    assert dockerfile_entry(str(tmp_path), "Containerfile")[0] == "Containerfile"
