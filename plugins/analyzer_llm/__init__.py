"""Source analyzer ``llm``: asks an OpenAI-compatible chat endpoint for the compose definition.

``POST {SLIPWAY_AI_ENDPOINT}/chat/completions`` with ``SLIPWAY_AI_MODEL`` and
``Authorization: Bearer {SLIPWAY_AI_API_KEY}`` (through httpx, ``SLIPWAY_AI_TIMEOUT``
seconds, default 60). The request carries the repository's file list and the first
kilobytes of the files that tell a stack apart (never files whose links leave the tree),
and the rules the answer must follow: one compose YAML document with the keys the
compose method supports plus ``build`` (``context`` and ``dockerfile`` or
``dockerfile_inline``) on the operator's base images. The answer (a fenced block is
unwrapped) is checked by the deploy with the compose parser before anything is built or
run; an unusable answer fails the deploy with the reason.
"""
from __future__ import annotations

import os
import re

import httpx

from plugins.source_common import images
from plugins.source_common.images import DEFAULT_IMAGES, PORT, base_image
from plugins.source_common.source import read_text
from ports.settings import Setting, positive_seconds, stripped, text
from ports import hookimpl
from ports.analyzer import Analysis, AnalysisError, Analyzer, AnalyzerFactory

MAX_FILES = 200
KEY_FILES = ("README.md", "README", "package.json", "requirements.txt", "pyproject.toml", "Pipfile", "go.mod",
             "main.go", "app.py", "main.py", "manage.py", "index.html", "Containerfile", "Dockerfile",
             "compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml", "Gemfile", "composer.json")
FILE_BYTES = 4000
_FENCE = re.compile(r"```(?:ya?ml)?[ \t]*\n(.*?)```", re.S)

RULES = """You write the compose definition (YAML) that builds and runs the repository below on a
container engine. Answer with that YAML document only, nothing else.
Allowed top-level keys: services, volumes. Allowed keys of a service: image, build, command,
environment, ports, volumes, depends_on, healthcheck. build is a map with context (a directory of
the repository, "." for its top) and either dockerfile (a file of the repository) or
dockerfile_inline (the Containerfile text). Volumes are named volumes declared under the
top-level volumes (NAME:/path); no bind mounts. Ports are "CONTAINER" (published on a free
host port). Write a literal $ as $$.
Base images to use in builds: static sites {static} (serve with httpd -f -p {port} -h /www),
Python {python}, Node.js {node}, Go {go}. The web process listens on port {port} (set PORT={port})
and that port is listed under ports."""


def _tree(root: str) -> list[str]:
    listed = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "node_modules")
        for name in sorted(files):
            listed.append(os.path.relpath(os.path.join(folder, name), root))
            if len(listed) >= MAX_FILES:
                return listed
    return listed


def prompt(root: str, settings) -> tuple[str, str]:
    """(system message, user message) for the chat endpoint."""
    rules = RULES.format(port=PORT, **{k: base_image(settings, v) for k, v in (
        ("static", "SLIPWAY_IMAGE_STATIC"), ("python", "SLIPWAY_IMAGE_PYTHON"), ("node", "SLIPWAY_IMAGE_NODE"),
        ("go", "SLIPWAY_IMAGE_GO"))})
    parts = ["Files of the repository:", *_tree(root)]
    for name in KEY_FILES:
        text = read_text(root, name, limit=FILE_BYTES)
        if text is not None:
            parts += ["", f"--- {name} ---", text]
    return rules, "\n".join(parts)


def compose_from_answer(content) -> str:
    """The YAML of a chat answer (unwrapped from a ``` fence when there is one)."""
    if not isinstance(content, str) or not content.strip():
        raise AnalysisError("the AI endpoint answered no text")
    fenced = _FENCE.search(content)
    return (fenced.group(1) if fenced else content).strip() + "\n"


ENDPOINT = Setting(
    "SLIPWAY_AI_ENDPOINT", stripped, None,
    "the `llm` analyzer: an OpenAI-compatible base URL (it calls `POST {endpoint}/chat/completions`; "
    "required with `llm`)")
MODEL = Setting("SLIPWAY_AI_MODEL", stripped, None, "the `llm` analyzer's model (required with `llm`)")
API_KEY = Setting("SLIPWAY_AI_API_KEY", text, None, "the `llm` analyzer's bearer key", secret=True)
TIMEOUT = Setting("SLIPWAY_AI_TIMEOUT", positive_seconds, 60.0, "seconds the `llm` analyzer waits for an answer")
SETTINGS = (ENDPOINT, MODEL, API_KEY, TIMEOUT) + images.SETTINGS


class LlmAnalyzer(Analyzer):
    name = "llm"

    def check_settings(self, settings) -> None:
        for setting in (ENDPOINT, MODEL):
            if not setting.read(settings):
                raise ValueError(f"{setting.env} is required with SLIPWAY_AI_ANALYZER=llm")
        if not ENDPOINT.read(settings).startswith(("http://", "https://")):
            raise ValueError("SLIPWAY_AI_ENDPOINT must be an http:// or https:// URL")
        _timeout(settings)

    def analyze(self, source_dir: str, settings) -> Analysis:
        self.check_settings(settings)
        endpoint = ENDPOINT.read(settings).rstrip("/") + "/chat/completions"
        model = MODEL.read(settings)
        system, user = prompt(source_dir, settings)
        headers = {}
        if API_KEY.read(settings):
            headers["Authorization"] = f"Bearer {API_KEY.read(settings)}"
        body = {"model": model, "temperature": 0,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        try:
            response = httpx.post(endpoint, json=body, headers=headers, timeout=_timeout(settings))
        except httpx.HTTPError as exc:
            raise AnalysisError(f"the AI endpoint could not be reached: {type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            raise AnalysisError(f"the AI endpoint answered HTTP {response.status_code}: {response.text[:300]}")
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise AnalysisError("the AI endpoint's answer is not a chat completion "
                                "(no choices[0].message.content)") from None
        return Analysis(compose_from_answer(content), f"written by the model {model}")


def _timeout(settings) -> float:
    return TIMEOUT.read(settings)


class LlmFactory(AnalyzerFactory):
    name = LlmAnalyzer.name

    def create(self, settings) -> LlmAnalyzer:
        """The analyzer, once its settings are checked (``SLIPWAY_AI_ENDPOINT``,
        ``SLIPWAY_AI_MODEL``, ``SLIPWAY_AI_TIMEOUT``: a ``ValueError`` names the variable)."""
        analyzer = LlmAnalyzer()
        analyzer.check_settings(settings)
        return analyzer


@hookimpl
def register_analyzers():
    return [LlmFactory()]


__all__ = ["LlmAnalyzer", "DEFAULT_IMAGES", "compose_from_answer"]
