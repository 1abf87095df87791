"""Which of an engine's errors mean that what a call named, or needs, is gone
(``plugins.runtime_common.parsing.is_gone``): the runtimes raise those as
``ports.runtime.Gone``, which a deploy job knows as a delete under way."""
from __future__ import annotations

import pytest

from plugins.runtime_common.parsing import is_gone


class EngineAnswer(Exception):
    """What both clients raise: the status and the engine's own words."""

    def __init__(self, status_code: int, explanation: str):
        super().__init__(explanation)
        self.status_code, self.explanation = status_code, explanation


@pytest.mark.parametrize("status, words, gone", [
    (404, "no such container", True),
    (404, "anything at all", True),
    # Podman, starting a container whose network a delete removed meanwhile (seen in CI)
    (500, "unable to find network with name or ID slw-svc_c565a7cc161fe3bf-92a9315a: network not found", True),
    (500, "No such container: slw-web-1", True),
    (500, "Error: no such network", True),
    (500, "read /proc/4242/cgroup: no such process", False),
    (409, "network slw-net is in use", False),
    (500, "address already in use", False),
])
def test_gone_is_a_404_or_the_engines_words_for_it(status, words, gone):
    assert is_gone(EngineAnswer(status, words)) is gone
