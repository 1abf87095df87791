"""The Swarm runtime's pure parts: which images pin to the manager, how a task on another
node reads as a container state, and how Swarm's port conflicts are recognised."""
from __future__ import annotations

import pytest

from plugins.runtime_common.hostports import is_port_conflict
from plugins.runtime_swarm.runtime import _conflict_words, _scaled, _task_state, local_only


@pytest.mark.parametrize("image, pinned", [
    ("localhost/busybox:latest", True),
    ("localhost/slw-svc_1:3-web", True),
    ("localhost:5000/app:1", True),
    ("127.0.0.1:5000/app", True),
    ("sha256:" + "a" * 64, True),
    ("busybox", False),
    ("docker.io/library/nginx:1.27", False),
    ("registry.example.com/team/app:2", False),
    ("localhostile.example/app", False),
    ("team/app", False),
])
def test_images_only_the_manager_holds_are_pinned(image, pinned):
    assert local_only(image) is pinned


def _task(state, err="", code=None):
    status = {"State": state, "Err": err}
    if code is not None:
        status["ContainerStatus"] = {"ContainerID": "c1", "ExitCode": code}
    return {"ID": "t1", "Status": status}


@pytest.mark.parametrize("task, checked, expected", [
    (None, False, ("created", False, None, None)),
    (None, True, ("created", False, "starting", None)),
    (_task("pending"), False, ("created", False, None, None)),
    (_task("starting"), True, ("running", True, "starting", None)),  # Swarm: starting until healthy
    (_task("running"), True, ("running", True, "healthy", None)),
    (_task("running"), False, ("running", True, None, None)),
    (_task("complete", code=0), False, ("exited", False, None, 0)),
    (_task("failed", "task: non-zero exit (3)", code=3), False, ("exited", False, None, 3)),
    (_task("failed", "task: non-zero exit (137): dockerexec: unhealthy container", code=137), True,
     ("exited", False, "unhealthy", 137)),
    (_task("shutdown", code=0), True, ("exited", False, None, 0)),
])
def test_a_task_on_another_node_reads_as_a_container_state(task, checked, expected):
    assert _task_state(task, checked) == expected


def test_swarm_port_conflicts_read_as_the_engines_do():
    said = _conflict_words("no suitable node (host-mode port already in use on 1 node)")
    assert is_port_conflict(said) and said.startswith("no suitable node")
    assert _conflict_words("No such image: localhost/x:1") == "No such image: localhost/x:1"
    assert not is_port_conflict(_conflict_words("No such image: localhost/x:1"))


def test_scaling_changes_replicas_and_forces_a_new_task():
    spec = {"Mode": {"Replicated": {"Replicas": 1}}, "TaskTemplate": {"ForceUpdate": 2}}
    _scaled(0)(spec)
    assert spec["Mode"]["Replicated"]["Replicas"] == 0 and spec["TaskTemplate"]["ForceUpdate"] == 2
    _scaled(1, force=True)(spec)
    assert spec["Mode"]["Replicated"]["Replicas"] == 1 and spec["TaskTemplate"]["ForceUpdate"] == 3
