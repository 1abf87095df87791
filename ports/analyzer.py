"""The source-analyzer port: what the ``ai`` deploy method asks about a repository.

An analyzer looks at a checked-out source tree and answers with a compose definition
that runs it. Besides the keys the ``compose`` deploy method supports, a service of the
answer may carry ``build`` (compose specification: a context path, or a map with
``context``, ``dockerfile`` and ``dockerfile_inline``), relative to the source tree; the
deploy builds those images first and publishes the ports an image ``EXPOSE``s when the
service lists no ``ports``. Plugins contribute analyzer factories
(:class:`AnalyzerFactory`) through the ``register_analyzers`` hook;
``SLIPWAY_AI_ANALYZER`` (default :data:`DEFAULT_ANALYZER`) names the one the app creates.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass


#: the analyzer ``SLIPWAY_AI_ANALYZER`` names when it is unset
DEFAULT_ANALYZER = "heuristic"


class AnalysisError(Exception):
    """The analyzer could not produce a usable definition; the message says why, for people."""


@dataclass(frozen=True)
class Analysis:
    compose: str  # compose text, possibly with ``build`` entries relative to the source tree
    summary: str  # one line for the timeline, e.g. "static site (index.html) on busybox"


class Analyzer(ABC):
    @property
    @abstractmethod
    def name(self) -> str:
        """The value of ``SLIPWAY_AI_ANALYZER`` that selects this analyzer."""

    @abstractmethod
    def analyze(self, source_dir: str, settings: Mapping[str, str]) -> Analysis:
        """Inspect ``source_dir`` (read only; never follow links out of it) and answer an
        :class:`Analysis`, or raise :class:`AnalysisError`. Runs in a worker thread;
        may take seconds (an ``llm`` analyzer calls out over HTTP)."""


class AnalyzerFactory(ABC):
    """What ``register_analyzers`` returns: ``name`` (the value of ``SLIPWAY_AI_ANALYZER``
    that selects it) and ``create(settings)``, called at start-up for the selected one
    only."""

    name: str

    @abstractmethod
    def create(self, settings: Mapping[str, str]) -> Analyzer:
        """The analyzer; a setting it needs that is missing or wrong is a ``ValueError``
        naming the variable (start-up stops)."""
