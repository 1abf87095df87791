"""Source analyzer ``heuristic``: deterministic rules from the files a repository has.

In this order: a compose file (run as written), a ``Containerfile`` or ``Dockerfile``
(built as it is), Go (``go.mod``), Node (``package.json``), Python
(``requirements.txt``, ``pyproject.toml``, ``Pipfile``, ``manage.py``, ``app.py``,
``main.py``), a static site (``index.html`` at the top or in ``public/``, ``dist/``,
``build/``, ``site/``, ``www/``, ``_site/``). For the last four it writes a build on the
operator's base image of that stack (``SLIPWAY_IMAGE_GO``, ``SLIPWAY_IMAGE_NODE``,
``SLIPWAY_IMAGE_PYTHON``, ``SLIPWAY_IMAGE_STATIC``); every generated service listens on
port 8080 (``PORT=8080`` in its environment), which is published.
"""
from __future__ import annotations

import json
import re

from core.panel.compose import dump_compose
from plugins.source_common import repository_compose
from plugins.source_common.images import DEFAULT_IMAGES, PORT, SETTINGS, base_image  # noqa: F401 (DEFAULT_IMAGES, SETTINGS: part of this analyzer)
from plugins.source_common.source import found, inside, read_text
from ports import hookimpl
from ports.analyzer import Analysis, AnalysisError, Analyzer, AnalyzerFactory

STATIC_DIRS = ("", "public", "dist", "build", "site", "www", "_site")
PYTHON_MARKERS = ("requirements.txt", "pyproject.toml", "Pipfile", "manage.py", "app.py", "main.py")


def _compose(dockerfile: str) -> str:
    document = {"services": {"app": {
        "build": {"context": ".", "dockerfile_inline": dockerfile.replace("$", "$$")},
        "environment": {"PORT": str(PORT)},
        "ports": [str(PORT)],
    }}}
    return dump_compose(document)


def _json_cmd(*parts: str) -> str:
    return json.dumps(list(parts))


def static_site(root: str, settings) -> Analysis | None:
    for folder in STATIC_DIRS:
        if found(root, [f"{folder}/index.html" if folder else "index.html"]) is None:
            continue
        image = base_image(settings, "SLIPWAY_IMAGE_STATIC")
        dockerfile = (f"FROM {image}\nCOPY {folder or '.'}/ /www/\nEXPOSE {PORT}\n"
                      f"CMD {_json_cmd('httpd', '-f', '-p', str(PORT), '-h', '/www')}\n")
        return Analysis(_compose(dockerfile), f"static site ({folder + '/' if folder else ''}index.html) on {image}")
    return None


def go(root: str, settings) -> Analysis | None:
    if found(root, ["go.mod"]) is None:
        return None
    image = base_image(settings, "SLIPWAY_IMAGE_GO")
    dockerfile = (f"FROM {image}\nWORKDIR /src\nCOPY . .\nRUN go build -o /usr/local/bin/app .\n"
                  f"ENV PORT={PORT}\nEXPOSE {PORT}\nCMD {_json_cmd('/usr/local/bin/app')}\n")
    return Analysis(_compose(dockerfile), f"Go module (go.mod) on {image}")


def node(root: str, settings) -> Analysis | None:
    text = read_text(root, "package.json")
    if text is None:
        return None
    try:
        package = json.loads(text)
    except ValueError as exc:
        raise AnalysisError(f"package.json is not valid JSON: {exc}") from None
    package = package if isinstance(package, dict) else {}
    scripts = package.get("scripts") if isinstance(package.get("scripts"), dict) else {}
    if "start" in scripts:
        command = _json_cmd("npm", "start")
    else:
        main = package.get("main") if isinstance(package.get("main"), str) else None
        main = main or found(root, ["server.js", "index.js", "app.js"])
        if not main or inside(root, main) is None:
            raise AnalysisError("package.json has no start script and no main file (server.js, index.js, app.js)")
        command = _json_cmd("node", main)
    install = "npm ci --omit=dev" if found(root, ["package-lock.json"]) else "npm install --omit=dev"
    build = "RUN npm run build\n" if "build" in scripts else ""
    image = base_image(settings, "SLIPWAY_IMAGE_NODE")
    dockerfile = (f"FROM {image}\nWORKDIR /app\nCOPY . .\nRUN {install}\n{build}ENV PORT={PORT} NODE_ENV=production\n"
                  f"EXPOSE {PORT}\nCMD {command}\n")
    return Analysis(_compose(dockerfile), f"Node.js (package.json) on {image}")


def python(root: str, settings) -> Analysis | None:
    marker = found(root, PYTHON_MARKERS)
    if marker is None:
        return None
    requirements = read_text(root, "requirements.txt") or ""
    if found(root, ["requirements.txt"]):
        install = "RUN pip install --no-cache-dir -r requirements.txt\n"
    elif found(root, ["pyproject.toml"]):
        install = "RUN pip install --no-cache-dir .\n"
    else:
        install = ""
    if found(root, ["manage.py"]):
        command = _json_cmd("python", "manage.py", "runserver", f"0.0.0.0:{PORT}")
    elif re.search(r"(?im)^gunicorn\b", requirements) and found(root, ["app.py", "wsgi.py"]):
        module = "wsgi" if found(root, ["wsgi.py"]) else "app"
        command = _json_cmd("gunicorn", "-b", f"0.0.0.0:{PORT}", f"{module}:app")
    else:
        entry = found(root, ["app.py", "main.py", "server.py"])
        if entry is None:
            raise AnalysisError(f"a Python project ({marker}) without app.py, main.py, server.py or manage.py: "
                                "nothing to start")
        command = _json_cmd("python", entry)
    image = base_image(settings, "SLIPWAY_IMAGE_PYTHON")
    dockerfile = (f"FROM {image}\nWORKDIR /app\nCOPY . .\n{install}ENV PORT={PORT} PYTHONUNBUFFERED=1\n"
                  f"EXPOSE {PORT}\nCMD {command}\n")
    return Analysis(_compose(dockerfile), f"Python ({marker}) on {image}")


RULES = (go, node, python, static_site)


class HeuristicAnalyzer(Analyzer):
    name = "heuristic"

    def analyze(self, source_dir: str, settings) -> Analysis:
        own = repository_compose(source_dir)
        if own is not None:
            text, what = own
            return Analysis(text, f"the repository's own {what}, as it is")
        for rule in RULES:
            analysis = rule(source_dir, settings)
            if analysis is not None:
                return analysis
        raise AnalysisError("could not recognise the repository: no compose file, Containerfile, Dockerfile, "
                            "go.mod, package.json, Python project or index.html")


class HeuristicFactory(AnalyzerFactory):
    name = HeuristicAnalyzer.name

    def create(self, settings) -> HeuristicAnalyzer:
        return HeuristicAnalyzer()  # its base images are read per analysis (``base_image``)


@hookimpl
def register_analyzers():
    return [HeuristicFactory()]
