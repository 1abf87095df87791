"""What ``core.panel.dumps`` reads from a compose document: the engine components, the
volumes still archived, the backup's kind, the parts of a manifest; and the restore of a
part choosing the running container of its component."""
from __future__ import annotations

import pytest

from core.panel import dumps
from core.panel.compose.loader import load_compose

COMPOSE = """
services:
  db:
    image: postgres:16
    labels: {slipway.backup: postgres}
    volumes: [pgdata:/var/lib/postgresql/data, shared:/shared]
  cache:
    image: redis:7
    labels: ["slipway.backup=redis", "other=x"]
    volumes: [{type: volume, source: rdata, target: /data}]
  app:
    image: app:1
    labels: {slipway.backup: sqlite}
    volumes: [shared:/shared, files:/files]
volumes: {pgdata: {}, rdata: {}, shared: {}, files: {}}
"""


def test_engine_components_in_compose_order_with_their_kind_image_and_volumes():
    document = load_compose(COMPOSE)
    assert dumps.engine_components(document) == {
        "db": {"kind": "postgres", "image": "postgres:16", "volumes": ["pgdata", "shared"]},
        "cache": {"kind": "redis", "image": "redis:7", "volumes": ["rdata"]}}
    assert dumps.backup_kind(dumps.engine_components(document)) == "postgres"
    assert dumps.backup_kind({}) == "volumes"
    for nothing in (None, {}, {"services": None}, {"services": {"a": "not a map"}}):
        assert dumps.engine_components(nothing) == {}


def test_only_volumes_that_engine_components_alone_mount_are_left_out():
    document = load_compose(COMPOSE)
    assert dumps.archived_volumes(document, ("files", "pgdata", "rdata", "shared")) == ("files", "shared")
    assert dumps.archived_volumes(None, ("a",)) == ("a",)


def test_manifest_parts_read_old_and_new_manifests():
    old = {"volumes": [{"name": "data", "member": "volumes/0.tar", "size_bytes": 3}]}
    assert dumps.manifest_parts(old) == [{"name": "data", "member": "volumes/0.tar", "size_bytes": 3,
                                          "kind": "volumes"}]
    new = {"parts": [{"name": "db", "kind": "postgres", "member": "dumps/0.postgres", "size_bytes": 9}]}
    assert dumps.manifest_parts(new)[0]["kind"] == "postgres"


def test_verify_refuses_a_manifest_without_the_components_image_or_with_an_unknown_kind():
    part = {"name": "db", "kind": "postgres", "member": "m", "size_bytes": 1}
    with pytest.raises(dumps.DumpError, match="does not record the component's image"):
        dumps.verify_parts(None, {"parts": [part]}, lambda member: iter([b"x"]))
    with pytest.raises(dumps.DumpError, match="unknown kind"):
        dumps.verify_parts(None, {"parts": [{**part, "kind": "oracle"}], "engines": {"db": {"image": "i"}}},
                           lambda member: iter([b"x"]))
    dumps.verify_parts(None, {"parts": [{**part, "kind": "volumes"}]}, lambda member: iter([b"x"]))  # not checked


class _State:
    def __init__(self, id, component, running):
        self.id, self.running, self.labels = id, running, {"slipway.component": component}


class _Runtime:
    def __init__(self, states):
        self.states, self.inputs = states, []

    def containers(self, service_id):
        return self.states

    def exec_input(self, container, argv, chunks, size, env=None, user=None):
        self.inputs.append((container, user, b"".join(chunks), size))
        return b""


def test_a_dump_goes_into_the_running_container_of_its_component():
    runtime = _Runtime([_State("old", "db", False), _State("new", "db", True), _State("web", "app", True)])
    dumps.restore_part(runtime, None, "svc_1", "db", "postgres", iter([b"sql"]), 3)
    assert runtime.inputs == [("new", "postgres", b"sql", 3)]
    with pytest.raises(dumps.DumpError, match="component cache is not running"):
        dumps.restore_part(runtime, None, "svc_1", "cache", "redis", iter([b""]), 0)
    with pytest.raises(dumps.DumpError, match="component cache is not running"):
        list(dumps.dump_chunks(runtime, "svc_1", "cache", "redis"))


@pytest.mark.parametrize("image", ["3f2a", "sha256:3f2a", "localhost/slw-svc_other-db:1"])
def test_a_verification_refuses_an_image_the_image_rule_refuses_before_any_engine_call(image):
    part = {"name": "db", "kind": "postgres", "member": "db", "size_bytes": 1}
    with pytest.raises(dumps.DumpError, match="reads as an image id|was built for another service"):
        dumps.verify_parts(None, {"parts": [part], "engines": {"db": {"image": image}}}, lambda member: iter([b"x"]),
                           service_id="svc_mine")


class _Scratch:
    """Records the image of each scratch container a verification starts; its check passes."""

    def __init__(self):
        self.images = []

    def create_network(self, name, labels):
        pass

    def run(self, spec):
        self.images.append(spec.image)
        return "scratch"

    def put_file(self, container, path, chunks, size, mode=0o600):
        b"".join(chunks)

    def exec_run(self, container, argv, env=None, user=None):
        return b""

    def remove_container(self, container):
        pass

    def remove_network(self, name):
        pass


def test_a_verification_runs_the_recorded_image_id_and_holds_the_reference_to_the_image_rule():
    part = {"name": "db", "kind": "postgres", "member": "m", "size_bytes": 1}
    runtime = _Scratch()
    ran = "sha256:" + "ab" * 32
    manifest = {"parts": [part], "engines": {"db": {"kind": "postgres", "image": "postgres:16", "image_id": ran}}}
    dumps.verify_parts(runtime, manifest, lambda member: iter([b"x"]), service_id="svc_1")
    assert runtime.images == [ran]
    old = {"parts": [part], "engines": {"db": {"kind": "postgres", "image": "postgres:16"}}}  # made before ids
    dumps.verify_parts(runtime, old, lambda member: iter([b"x"]), service_id="svc_1")
    assert runtime.images == [ran, "postgres:16"]
    theirs = {"parts": [part], "engines": {"db": {"kind": "postgres", "image": "slw-svc_2-web:1", "image_id": ran}}}
    with pytest.raises(dumps.DumpError, match="built for another service"):
        dumps.verify_parts(runtime, theirs, lambda member: iter([b"x"]), service_id="svc_1")
    assert len(runtime.images) == 2
