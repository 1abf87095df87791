"""Commands in containers (``exec_output``, ``exec_run``, ``exec_input``, ``put_file``) on
each runtime plugin against its real engine (Swarm: the task's container on the
manager): output streamed out in pieces, the exit status checked once it ends (with the
stderr tail), input and files streamed in with their owner and mode."""
from __future__ import annotations

import hashlib
import secrets

import pytest

from ports.runtime import SERVICE_LABEL, ContainerSpec, EngineError
from tests.support.engine import BUSYBOX, wait_for

pytestmark = pytest.mark.runtime
MB = 1024 * 1024


@pytest.fixture
def idle(runtime):
    service_id = "svc_exec" + secrets.token_hex(4)
    container = runtime.run(ContainerSpec(name=f"{service_id}-idle", image=BUSYBOX,
                                          labels={SERVICE_LABEL: service_id}, command=("sleep", "100000")))
    wait_for(lambda: runtime.inspect(container) and runtime.inspect(container).running, "the container runs")
    wait_for(lambda: _answers(runtime, container), "exec works")
    yield runtime, container
    runtime.remove_service(service_id)


def _answers(runtime, container) -> bool:
    try:
        return runtime.exec_run(container, ["true"]) == b""
    except EngineError:  # a Swarm task may need a moment to be there
        return False


def test_output_is_streamed_and_a_failure_names_its_status_and_stderr(idle):
    runtime, container = idle
    chunks = list(runtime.exec_output(container, ["sh", "-c", "seq 1 1500000; echo noise >&2"]))
    lines = b"".join(chunks).split()
    assert len(lines) == 1500000 and lines[-1] == b"1500000"
    assert len(chunks) > 1 and max(len(c) for c in chunks) <= MB  # never whole in memory
    assert runtime.exec_run(container, ["sh", "-c", 'echo "$A-$B"'], env={"A": "x", "B": "y"}) == b"x-y\n"
    uid = runtime.exec_run(container, ["sh", "-c", 'while read k v r; do [ "$k" = Uid: ] && echo $v || :; done '
                                                   "< /proc/self/status"], user="65534:65534")
    assert uid == b"65534\n"
    with pytest.raises(EngineError, match=r"exit status 3.*went wrong"):
        list(runtime.exec_output(container, ["sh", "-c", "echo out; echo went wrong >&2; exit 3"]))
    with pytest.raises(EngineError):
        runtime.exec_run(container, ["/no/such/command"])


def _content(runtime, container, path) -> bytes:
    return b"".join(runtime.exec_output(container, ["cat", path]))


def test_input_and_files_are_streamed_in(idle):
    runtime, container = idle
    pieces = [secrets.token_bytes(256 * 1024) for _ in range(12)]
    data = b"".join(pieces)
    size = len(data)
    runtime.exec_input(container, ["sh", "-c", "cat > /tmp/from-stdin"], iter(pieces), size)
    assert hashlib.sha256(_content(runtime, container, "/tmp/from-stdin")).digest() == hashlib.sha256(data).digest()
    assert b"slipway-input" not in runtime.exec_run(container, ["ls", "/tmp"])  # the input file is removed
    runtime.put_file(container, "/tmp/owned", iter(pieces), size, mode=0o640)
    listed = runtime.exec_run(container, ["ls", "-ln", "/tmp/owned"]).split()
    assert (listed[0], listed[4]) == (b"-rw-r-----", str(size).encode())
    assert _content(runtime, container, "/tmp/owned") == data
    with pytest.raises(EngineError, match="bytes instead of"):
        runtime.put_file(container, "/tmp/short", iter(pieces[:2]), size)
    with pytest.raises(EngineError, match="exit status 1"):
        runtime.exec_input(container, ["sh", "-c", "cat >/dev/null; exit 1"], iter(pieces), size)
    assert b"slipway-input" not in runtime.exec_run(container, ["ls", "/tmp"])


def _processes(runtime, container) -> list[bytes]:
    """The command lines of the container's processes (its ``/proc``)."""
    script = 'for d in /proc/[0-9]*; do tr "\\0" " " < "$d/cmdline" 2>/dev/null; echo; done'
    return [line.strip() for line in runtime.exec_run(container, ["sh", "-c", script]).splitlines() if line.strip()]


def test_a_command_answers_its_exit_status_and_the_tail_of_its_output(idle):
    """``exec_command`` (a scheduled task's run): any exit status is an answer, not an
    error; standard output and error as the engine passed them on; the last ``limit``
    bytes only."""
    runtime, container = idle
    done = runtime.exec_command(container, ["sh", "-c", "echo out; echo err >&2; echo $((6*7)); exit 3"],
                                limit=1024, timeout=30)
    assert (done.exit_code, done.timed_out) == (3, False)
    # both streams (the engine passes each on as it reads it: their order between them may
    # change), and the wrapper's line is not in it
    assert sorted(done.output.split()) == [b"42", b"err", b"out"]
    ok = runtime.exec_command(container, ["true"], limit=1024, timeout=30)
    assert (ok.exit_code, ok.output, ok.timed_out) == (0, b"", False)
    long = runtime.exec_command(container, ["seq", "1", "200000"], limit=100, timeout=30)
    assert long.exit_code == 0 and len(long.output) == 100 and long.output.endswith(b"\n200000\n")
    missing = runtime.exec_command(container, ["/no/such/command"], limit=1024, timeout=30)
    assert missing.exit_code not in (0, None) and b"/no/such/command" in missing.output


def test_a_command_past_its_time_limit_is_killed_with_what_it_started(idle):
    runtime, container = idle
    n = 100 + secrets.randbelow(900)  # the sleeps' own lengths, to find them among the processes
    script = f"echo started; sleep 3{n} & sleep 4{n}; echo never"
    done = runtime.exec_command(container, ["sh", "-c", script], limit=1024, timeout=2)
    assert done.timed_out and done.exit_code is None
    assert done.output == b"started\n"
    wait_for(lambda: not [p for p in _processes(runtime, container) if p in (f"sleep 3{n}".encode(),
                                                                             f"sleep 4{n}".encode())],
             "the command and the process it started are gone")
    assert any(b"sleep 100000" in p for p in _processes(runtime, container))  # the container's own goes on
