"""``ContainerRuntime.follow_logs`` on both client plugins against the real engine: lines
written after the stream opened arrive with their stream, ``since`` replays older ones,
and ``close()`` from another thread ends the engine stream and wakes the reader."""
from __future__ import annotations

import secrets
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from ports.runtime import SERVICE_LABEL, ContainerSpec, EngineError
from tests.support.engine import BUSYBOX, wait_for

pytestmark = pytest.mark.runtime

TICKER = ("sh", "-c", "i=0; while true; do i=$((i+1)); echo out-$i; echo err-$i >&2; usleep 200000; done")


@pytest.fixture
def ticker(runtime):
    service_id = "svc_follow" + secrets.token_hex(4)
    container = runtime.run(ContainerSpec(name=f"{service_id}-tick", image=BUSYBOX,
                                          labels={SERVICE_LABEL: service_id}, command=TICKER))
    yield runtime, container
    runtime.remove_service(service_id)


def _reader(stream, into: list):
    thread = threading.Thread(target=lambda: [into.append(line) for line in stream],
                              daemon=True)
    thread.start()
    return thread


def test_follow_delivers_new_lines_of_both_streams_and_stops_on_close(ticker):
    runtime, container = ticker
    wait_for(lambda: runtime.logs(container, tail=1), "the first line")
    opened = datetime.now(timezone.utc)
    stream = runtime.follow_logs(container)
    lines: list = []
    reader = _reader(stream, lines)
    wait_for(lambda: len([l for l in lines if l.stream == "stderr"]) >= 3, "three stderr lines")
    numbers = [int(l.message.split("-")[1]) for l in lines if l.stream == "stdout"]
    assert numbers == sorted(numbers) and numbers
    # only new lines: nothing from before the stream opened (engine times are whole seconds)
    assert all(l.timestamp >= opened.replace(microsecond=0) for l in lines)
    assert {l.stream for l in lines} == {"stdout", "stderr"}
    stream.close()
    reader.join(timeout=10)
    assert not reader.is_alive(), "close() did not end the engine stream"
    count = len(lines)
    time.sleep(0.6)
    assert len(lines) == count


def test_follow_since_replays_older_lines(ticker):
    runtime, container = ticker
    wait_for(lambda: len(runtime.logs(container, tail=None)) >= 6, "a few lines")
    stream = runtime.follow_logs(container, since=datetime.now(timezone.utc) - timedelta(minutes=5))
    lines: list = []
    reader = _reader(stream, lines)
    wait_for(lambda: any(l.message == "out-1" for l in lines), "the first line, replayed")
    stream.close()
    reader.join(timeout=10)
    assert not reader.is_alive()


def test_follow_ends_when_the_container_stops(ticker):
    runtime, container = ticker
    stream = runtime.follow_logs(container)
    lines: list = []
    reader = _reader(stream, lines)
    wait_for(lambda: lines, "a line")
    runtime.stop(container, timeout=0)
    reader.join(timeout=15)
    assert not reader.is_alive(), "the stream did not end with the container"


def test_follow_of_a_missing_container_is_an_engine_error(runtime):
    with pytest.raises(EngineError):
        runtime.follow_logs("no-such-container-" + secrets.token_hex(4))
