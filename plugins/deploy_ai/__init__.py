"""Deploy method ``ai``: analyse a repository, write a compose definition for it and run that.

The deploy job clones ``ai_url`` (the remote's default branch, shallowly; the same
schemes as ``git_url``), hands the tree to the analyzer ``SLIPWAY_AI_ANALYZER`` names
(``heuristic`` by default, or ``llm``; analyzers are plugins, see
:mod:`ports.analyzer`), checks the compose definition it answers with the compose
parser, builds its images and runs it like the compose method. The definition that runs
(``build`` replaced by the built images) is kept on the service and shown as its
``compose``. A redeploy fetches and analyses again.
"""
from __future__ import annotations

import os

from core.errors import Invalid
from plugins.deploy_git import invalid_reason, run_source, source, stale
from ports import hookimpl
from ports.analyzer import AnalysisError
from ports.deploy import DeployMethod, DeployPlan, Prepared

DEFAULT_ANALYZER = "heuristic"


class AiDeploy(DeployMethod):
    name = "ai"
    request_schema = {
        "required": ["ai_url"],
        "properties": {"ai_url": {"type": "string", "minLength": 1}},
    }

    def __init__(self):
        self.settings = {}
        self.allowed = source.DEFAULT_SCHEMES
        self.timeout = source.DEFAULT_TIMEOUT
        self.analyzer = None

    def configure(self, settings, plugins) -> None:
        self.settings = settings
        self.allowed = source.allowed_schemes(settings)
        self.timeout = source.git_timeout(settings)
        analyzers = plugins.get("analyzers") or {}
        wanted = (settings.get("SLIPWAY_AI_ANALYZER") or "").strip() or DEFAULT_ANALYZER
        if wanted not in analyzers:
            raise ValueError(f"SLIPWAY_AI_ANALYZER: no loaded plugin provides {wanted!r} "
                             f"(loaded: {', '.join(sorted(analyzers)) or 'none'})")
        self.analyzer = analyzers[wanted]
        self.analyzer.check_settings(settings)

    def plan(self, request: dict, catalog: dict) -> DeployPlan:
        source.check_url(request["ai_url"], "ai_url", self.allowed)
        return DeployPlan(compose="", components=(), source={"ai_url": request["ai_url"]})

    def built_images(self, service) -> tuple:
        return tuple(source.built_images(service.id, service.compose))

    def prepare(self, service, runtime, workdir: str, progress) -> Prepared:
        if self.analyzer is None:
            raise RuntimeError("no analyzer configured (SLIPWAY_AI_ANALYZER)")
        tree = os.path.join(workdir, "src")
        progress(f"cloning {source.redact_url(service.ai_url)}")
        commit, branch = source.clone(service.ai_url, None, tree, allowed=self.allowed, timeout=self.timeout)
        note = f"commit {commit[:12]} on {branch}"
        progress(f"analysing {note} with the {self.analyzer.name} analyzer")
        try:
            analysis = self.analyzer.analyze(tree, self.settings)
        except AnalysisError as exc:
            raise source.SourceError(f"{note}: the {self.analyzer.name} analyzer failed: {exc}") from None
        progress(f"{self.analyzer.name} analyzer: {analysis.summary}")
        try:
            source.check_compose(analysis.compose, tree)  # nothing is built from an unusable answer
        except Invalid as exc:
            raise source.SourceError(f"{note}: the {self.analyzer.name} analyzer's compose definition is "
                                     f"invalid: {invalid_reason(exc)}") from None
        try:
            compose = run_source(analysis.compose, tree, runtime, service=service, revision=commit,
                                 progress=progress)
        except source.SourceError as exc:
            raise source.SourceError(f"{note}: {exc}") from None
        return Prepared(compose=compose, note=f"{note}; {self.analyzer.name} analyzer: {analysis.summary}",
                        commit=commit, stale_images=stale(service, compose))


@hookimpl
def register_deploy_methods():
    return [AiDeploy()]
