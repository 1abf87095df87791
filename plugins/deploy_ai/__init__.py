"""Deploy method ``ai``: analyse a repository, write a compose definition for it and run that.

The deploy job clones ``ai_url`` (``git_branch`` when given, else the remote's default
branch, shallowly; the same schemes as ``git_url``), hands the tree to the analyzer ``SLIPWAY_AI_ANALYZER`` names
(``heuristic`` by default, or ``llm``; analyzers are plugins, see
:mod:`ports.analyzer`), checks the compose definition it answers with the compose
parser, builds its images and runs it like the compose method. The definition that runs
(``build`` replaced by the built images) is kept on the service and shown as its
``compose``. A redeploy fetches and analyses again.
"""
from __future__ import annotations

import os

from core.errors import Invalid
from plugins.source_common import (DEPLOY_KEY_ID, VARIABLES, check_variables, clone,
                                   invalid_reason, run_source, source, stale)
from ports import hookimpl
from ports.analyzer import DEFAULT_ANALYZER, AnalysisError, Analyzer
from ports.deploy import DeployMethod, DeployMethodFactory, DeployPlan, Prepared, host_ports
from ports.runtime import Cancelled
from ports.settings import Setting, stripped

ANALYZER = Setting("SLIPWAY_AI_ANALYZER", stripped, DEFAULT_ANALYZER,
                   "analyzer plugin of the `ai` method: `heuristic` (rules, no network) or `llm`")
#: what the method reads: its analyzer, and how sources are fetched and built
SETTINGS = (ANALYZER,) + source.SETTINGS


class AiDeploy(DeployMethod):
    name = "ai"
    request_schema = {
        "title": "AI",
        "description": "Let the analyzer write the build",
        "required": ["ai_url"],
        "properties": {"ai_url": {"type": "string", "minLength": 1, "title": "Repository URL",
                                  "description": "the repository the analyzer reads and builds (the schemes "
                                                 "of a git URL)"},
                       "git_branch": {"type": "string", "minLength": 1, "title": "Branch",
                                      "description": "the branch of ai_url analysed and deployed (default: the "
                                                     "remote's default branch); a preview's head branch"},
                       "deploy_key_id": DEPLOY_KEY_ID, "variables": VARIABLES},
    }

    #: ``variables`` are the environment of every container it runs
    variables_as_environment = True
    #: what it keeps per service (the service's ``source``), and what it is
    source_fields = ("ai_url", "git_branch")
    fetches_source = deploys_on_push = previews = True

    def __init__(self, settings=None, *, analyzer: Analyzer | None = None,
                 host_ports: tuple = DeployMethod.host_ports):
        """``settings``: the ``SLIPWAY_*`` variables (read here, as the git method reads
        them, and handed to the analyzer); ``analyzer``: the one ``SLIPWAY_AI_ANALYZER``
        names (None: the method plans but cannot deploy)."""
        super().__init__(host_ports=host_ports)
        self.settings = settings if settings is not None else {}
        self.sources = source.source_settings(self.settings, host_ports=self.host_ports)
        self.analyzer = analyzer

    def plan(self, request: dict, catalog: dict) -> DeployPlan:
        source.check_source(request["ai_url"], "ai_url", self.sources)
        source.check_branch(request.get("git_branch"))
        variables = check_variables(request.get("variables"))
        return DeployPlan(compose="", components=(), variables=variables,
                          source={"ai_url": request["ai_url"], "git_branch": request.get("git_branch")})

    def built_images(self, service) -> tuple:
        return tuple(source.built_images(service.id, service.compose))

    def prepare(self, service, runtime, workdir: str, progress, cancel=None, deploy_key=None,
                commit: str | None = None, commits: tuple = ()) -> Prepared:
        if self.analyzer is None:
            raise RuntimeError("no analyzer configured (SLIPWAY_AI_ANALYZER)")
        tree = os.path.join(workdir, "src")
        url, wanted = service.source.get("ai_url"), service.source.get("git_branch")
        progress(f"cloning {source.redact_url(url)}" + (f" ({wanted})" if wanted else ""))
        ancestry = []
        commit, branch, host_key = clone(url, wanted, tree, self.sources, cancel=cancel,
                                         deploy_key=deploy_key, commit=commit, host_key=service.ssh_host_key,
                                         commits=commits, ancestry=ancestry)
        note = f"commit {commit[:12]} on {branch}"
        progress(f"analysing {note} with the {self.analyzer.name} analyzer")
        try:
            analysis = self.analyzer.analyze(tree, self.settings)
        except source.SourceError as exc:  # e.g. a file it looked for is a link leading out of the tree
            raise source.SourceError(f"{note}: {exc}") from None
        except AnalysisError as exc:
            raise source.SourceError(f"{note}: the {self.analyzer.name} analyzer failed: {exc}") from None
        progress(f"{self.analyzer.name} analyzer: {analysis.summary}")
        try:
            # nothing is built from an unusable answer
            source.check_compose(analysis.compose, tree, host_ports=self.sources.host_ports)
        except source.SourceError as exc:
            raise source.SourceError(f"{note}: {exc}") from None
        except Invalid as exc:
            raise source.SourceError(f"{note}: the {self.analyzer.name} analyzer's compose definition is "
                                     f"invalid: {invalid_reason(exc)}") from None
        try:
            compose = run_source(analysis.compose, tree, runtime, service=service, revision=commit,
                                 progress=progress, settings=self.sources, workdir=workdir, cancel=cancel)
        except source.SourceError as exc:
            raise source.SourceError(f"{note}: {exc}") from None
        except Cancelled as exc:
            raise Cancelled(f"{note}: {exc}") from None
        return Prepared(compose=compose, note=f"{note}; {self.analyzer.name} analyzer: {analysis.summary}",
                        commit=commit, ancestry=tuple(ancestry), stale_images=stale(service, compose),
                        ssh_host_key=host_key, branch=branch)


class AiFactory(DeployMethodFactory):
    name = AiDeploy.name

    def create(self, settings) -> AiDeploy:
        """The method with the analyzer the app made from ``SLIPWAY_AI_ANALYZER``
        (``settings.part("analyzers")``: a name no loaded plugin provides stops start-up)."""
        return AiDeploy(settings, analyzer=settings.part("analyzers"), host_ports=host_ports(settings))


@hookimpl
def register_deploy_methods():
    return [AiFactory()]
