"""The source analyzers of the ``ai`` deploy method: the heuristic rules on real files, and
the ``llm`` analyzer against a real (loopback) chat endpoint whose answers are checked
before anything is built. Also the repository URL rules and credential redaction."""
from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from app.pluginmanager import deploy_methods, make_plugin_manager
from core.errors import Invalid
from plugins.analyzer_heuristic import HeuristicAnalyzer
from plugins.analyzer_llm import LlmAnalyzer, LlmFactory, compose_from_answer
from core.panel.compose import parse_compose
from plugins.source_common import source
from ports.analyzer import AnalysisError
from tests.fixtures.fake_chat import FakeChat

SETTINGS = {"SLIPWAY_IMAGE_STATIC": "localhost/busybox:latest", "SLIPWAY_IMAGE_PYTHON": "example/python:9",
            "SLIPWAY_IMAGE_NODE": "example/node:99", "SLIPWAY_IMAGE_GO": "example/go:1"}


def write(root, files: dict):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(root)


def analyze(root, files, settings=SETTINGS):
    tree = write(root, files)
    analysis = HeuristicAnalyzer().analyze(tree, settings)
    document, builds = source.check_compose(analysis.compose, tree)  # valid, buildable from the tree
    return analysis, document, builds


def inline(document) -> str:
    return document["services"]["app"]["build"]["dockerfile_inline"].replace("$$", "$")


def test_a_static_site_is_served_by_busybox_httpd_from_www(tmp_path):
    analysis, document, _ = analyze(tmp_path, {"index.html": "<h1>hi</h1>"})
    dockerfile = inline(document)
    assert dockerfile.startswith("FROM localhost/busybox:latest\n")
    assert "COPY ./ /www/" in dockerfile and '"httpd", "-f", "-p", "8080", "-h", "/www"' in dockerfile
    assert document["services"]["app"]["ports"] == ["8080"]
    assert "static site" in analysis.summary


def test_a_static_site_in_public_and_the_default_static_image(tmp_path):
    _, document, _ = analyze(tmp_path, {"public/index.html": "x", "README.md": "docs"}, settings={})
    dockerfile = inline(document)
    assert dockerfile.startswith("FROM docker.io/library/busybox:stable\n") and "COPY public/ /www/" in dockerfile


def test_python_projects(tmp_path):
    analysis, document, _ = analyze(tmp_path / "flask", {"requirements.txt": "flask\n", "app.py": "print()"})
    dockerfile = inline(document)
    assert dockerfile.startswith("FROM example/python:9\n") and "pip install --no-cache-dir -r requirements.txt" in dockerfile
    assert '["python", "app.py"]' in dockerfile and analysis.summary.startswith("Python")
    _, document, _ = analyze(tmp_path / "gunicorn", {"requirements.txt": "gunicorn==22\n", "wsgi.py": "app = 1"})
    assert '["gunicorn", "-b", "0.0.0.0:8080", "wsgi:app"]' in inline(document)
    _, document, _ = analyze(tmp_path / "django", {"manage.py": "", "pyproject.toml": "[project]\nname='x'\n"})
    assert '"manage.py", "runserver", "0.0.0.0:8080"' in inline(document) and "pip install --no-cache-dir ." in inline(document)
    with pytest.raises(AnalysisError, match="nothing to start"):
        HeuristicAnalyzer().analyze(write(tmp_path / "lib", {"pyproject.toml": "[project]\n"}), SETTINGS)


def test_node_projects(tmp_path):
    package = {"name": "x", "scripts": {"start": "node server.js", "build": "tsc"}}
    analysis, document, _ = analyze(tmp_path / "a", {"package.json": json.dumps(package), "package-lock.json": "{}"})
    dockerfile = inline(document)
    assert dockerfile.startswith("FROM example/node:99\n") and "RUN npm ci --omit=dev" in dockerfile
    assert "RUN npm run build" in dockerfile and '["npm", "start"]' in dockerfile and "Node.js" in analysis.summary
    _, document, _ = analyze(tmp_path / "b", {"package.json": '{"name": "y"}', "index.js": ""})
    assert '["node", "index.js"]' in inline(document) and "npm install --omit=dev" in inline(document)
    with pytest.raises(AnalysisError, match="package.json is not valid JSON"):
        HeuristicAnalyzer().analyze(write(tmp_path / "c", {"package.json": "{"}), SETTINGS)


def test_go_modules_win_over_a_static_page(tmp_path):
    analysis, document, _ = analyze(tmp_path, {"go.mod": "module x\n", "main.go": "package main", "index.html": ""})
    dockerfile = inline(document)
    assert dockerfile.startswith("FROM example/go:1\n") and "go build -o /usr/local/bin/app ." in dockerfile
    assert analysis.summary.startswith("Go module")


def test_an_existing_containerfile_or_compose_file_is_used_as_it_is(tmp_path):
    analysis, document, builds = analyze(tmp_path / "cf", {"Containerfile": "FROM localhost/busybox:latest\n",
                                                           "index.html": "x", "package.json": "{}"})
    assert document["services"]["app"]["build"] == {"context": ".", "dockerfile": "Containerfile"}
    assert "Containerfile" in analysis.summary
    _, document, _ = analyze(tmp_path / "df", {"Dockerfile": "FROM localhost/busybox:latest\n"})
    assert document["services"]["app"]["build"]["dockerfile"] == "Dockerfile"
    compose = "services:\n  web:\n    image: localhost/busybox:latest\n    ports: ['8080']\n"
    analysis, document, builds = analyze(tmp_path / "compose", {"compose.yaml": compose, "Dockerfile": "FROM x\n"})
    assert analysis.compose == compose and builds == {} and "compose.yaml" in analysis.summary


def test_nothing_recognisable_is_a_readable_failure(tmp_path):
    with pytest.raises(AnalysisError, match="could not recognise the repository"):
        HeuristicAnalyzer().analyze(write(tmp_path, {"notes.txt": "hello"}), SETTINGS)


def test_links_out_of_the_tree_are_not_read(tmp_path):
    outside = tmp_path / "secret.json"
    outside.write_text('{"scripts": {"start": "leak"}}')
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "package.json").symlink_to(outside)
    (repo / "index.html").write_text("x")
    analysis = HeuristicAnalyzer().analyze(str(repo), SETTINGS)
    assert "static site" in analysis.summary  # the linked package.json was not taken


# --- the llm analyzer -----------------------------------------------------------------

LLM_SETTINGS = {**SETTINGS, "SLIPWAY_AI_MODEL": "test-model", "SLIPWAY_AI_API_KEY": "sk-test"}
GOOD = """Here you go:
```yaml
services:
  web:
    build:
      context: .
      dockerfile_inline: |
        FROM localhost/busybox:latest
        COPY . /www
        CMD ["httpd", "-f", "-p", "8080", "-h", "/www"]
    ports: ["8080"]
```
"""


@pytest.mark.sockets
def test_the_llm_analyzer_asks_the_chat_endpoint_and_unwraps_the_answer(tmp_path):
    tree = write(tmp_path, {"index.html": "<h1>page</h1>"})
    with FakeChat(GOOD) as chat:
        analysis = LlmAnalyzer().analyze(tree, {**LLM_SETTINGS, "SLIPWAY_AI_ENDPOINT": chat.url})
    document, builds = source.check_compose(analysis.compose, tree)
    assert set(builds) == {"web"} and analysis.summary == "written by the model test-model"
    [request] = chat.requests
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    assert request["json"]["model"] == "test-model"
    system, user = (m["content"] for m in request["json"]["messages"])
    assert "localhost/busybox:latest" in system and "index.html" in user and "<h1>page</h1>" in user


def _prepare_with(tmp_path, chat, repo_files):
    """AiDeploy.prepare on a real file:// repository with the llm analyzer; the runtime is
    None, so anything that tried to build or run would fail with an AttributeError."""
    repo = tmp_path / "repo"
    write(repo, repo_files)
    env = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", "one"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)
    settings = {**LLM_SETTINGS, "SLIPWAY_AI_ENDPOINT": chat.url, "SLIPWAY_AI_ANALYZER": "llm",
                "SLIPWAY_GIT_ALLOWED_SCHEMES": "file", "SLIPWAY_GIT_ALLOW_PRIVATE": "1"}
    method = deploy_methods(make_plugin_manager(), settings)["ai"]
    assert isinstance(method.analyzer, LlmAnalyzer)

    class Service:
        id, source, ssh_host_key = "svc_unit", {"ai_url": f"file://{repo}"}, None

    work = tmp_path / "work"
    work.mkdir()
    messages = []
    return lambda: method.prepare(Service, None, str(work), messages.append), messages


@pytest.mark.sockets
@pytest.mark.parametrize("answer, reason", [
    ("services:\n  web:\n    image: x\n    privileged: true\n", "unsupported key services.web.privileged"),
    ("I cannot help with that.", "needs a non-empty services map"),
    ("services: [oops", "not valid YAML"),
    ("services:\n  web:\n    build:\n      context: ../..\n", "build.context: not a directory of the repository"),
    ("services:\n  web:\n    build: .\n", "no Containerfile or Dockerfile in the build context"),
    ("services:\n  web:\n    image: x\n    volumes: ['/etc:/host']\n", "only named volumes are supported"),
])
def test_an_invalid_llm_answer_fails_the_deploy_readably_before_anything_runs(tmp_path, answer, reason):
    with FakeChat(answer) as chat:
        prepare, messages = _prepare_with(tmp_path, chat, {"index.html": "x"})
        with pytest.raises(source.SourceError) as failure:
            prepare()
    text = str(failure.value)
    assert "the llm analyzer's compose definition is invalid" in text and reason in text
    assert text.startswith("commit ") and " on main" in text
    assert not any(m.startswith("building") for m in messages)


@pytest.mark.sockets
@pytest.mark.parametrize("chat_args, reason", [
    ({"status": 500}, "answered HTTP 500"),
    ({"raw": b'{"choices": []}'}, "not a chat completion"),
    ({"raw": b"not json"}, "not a chat completion"),
])
def test_a_failing_chat_endpoint_is_a_readable_failure(tmp_path, chat_args, reason):
    with FakeChat(**chat_args) as chat:
        prepare, _ = _prepare_with(tmp_path, chat, {"index.html": "x"})
        with pytest.raises(source.SourceError, match=reason):
            prepare()


@pytest.mark.sockets
def test_an_unreachable_chat_endpoint_is_a_readable_failure(tmp_path):
    with FakeChat("") as chat:
        url = chat.url
    analyzer = LlmAnalyzer()
    with pytest.raises(AnalysisError, match="could not be reached"):
        analyzer.analyze(write(tmp_path, {"index.html": "x"}), {**LLM_SETTINGS, "SLIPWAY_AI_ENDPOINT": url})


def test_llm_settings_are_checked_at_start_up():
    with pytest.raises(ValueError, match="SLIPWAY_AI_ENDPOINT is required"):
        LlmAnalyzer().check_settings({"SLIPWAY_AI_MODEL": "m"})
    with pytest.raises(ValueError, match="SLIPWAY_AI_MODEL is required"):
        LlmAnalyzer().check_settings({"SLIPWAY_AI_ENDPOINT": "http://x"})
    with pytest.raises(ValueError, match="SLIPWAY_AI_ENDPOINT is required"):
        LlmFactory().create({"SLIPWAY_AI_MODEL": "m"})  # the selected analyzer's factory checks them
    with pytest.raises(ValueError, match="SLIPWAY_AI_ANALYZER: no loaded plugin provides 'magic'"):
        deploy_methods(make_plugin_manager(), {"SLIPWAY_AI_ANALYZER": "magic"})


def test_compose_from_answer():
    assert compose_from_answer("services: {}") == "services: {}\n"
    assert compose_from_answer("```yml\nservices: {}\n```\nthanks") == "services: {}\n"
    with pytest.raises(AnalysisError):
        compose_from_answer(None)


# --- URLs and redaction ---------------------------------------------------------------


@pytest.mark.parametrize("url, scheme", [
    ("https://github.com/a/b.git", "https"), ("HTTPS://x/y", "https"), ("ssh://git@host/a.git", "ssh"),
    ("git@github.com:a/b.git", "ssh"), ("host.example:repo", "ssh"), ("file:///srv/repo", "file"),
    ("http://127.0.0.1/x", "http"), ("/srv/repo", None), ("ext::sh -c touch% /tmp/x", None),
    ("./repo", None),
])
def test_schemes(url, scheme):
    assert source.scheme_of(url) == scheme


def test_check_url_names_the_field_and_never_repeats_the_url():
    with pytest.raises(Invalid) as failure:
        source.check_url("ftp://user:hunter2@host/x", "git_url", ("https", "ssh"))
    assert failure.value.fields == {"git_url": "scheme 'ftp' is not allowed; allowed: https, ssh"}
    for bad in ("/srv/repo", "-uhack", "https://x/a b", "ext::sh"):
        with pytest.raises(Invalid) as failure:
            source.check_url(bad, "ai_url", ("https", "ssh", "file"))
        assert list(failure.value.fields) == ["ai_url"]
    source.check_url("git@github.com:a/b.git", "git_url", ("ssh",))


@pytest.mark.parametrize("branch", ["-x", "a..b", "a b", "x.lock", "a/", "@{u}", ""])
def test_bad_branches(branch):
    with pytest.raises(Invalid):
        source.check_branch(branch)


def test_redaction():
    url = "https://deploy:s3cr3t-token@git.example/a.git"
    assert source.redact_url(url) == "https://***@git.example/a.git"
    secrets = source.url_secrets(url)
    assert source.redact("fatal: auth failed for s3cr3t-token and " + url, secrets) == \
        "fatal: auth failed for *** and https://***@git.example/a.git"
    assert source.redact_url("https://ghp_abcdefghijklmnop@github.com/x") == "https://***@github.com/x"
    assert source.redact_url("git@github.com:a/b.git") == "git@github.com:a/b.git"
    assert source.redact_url(None) is None


def test_allowed_schemes_setting():
    assert source.allowed_schemes({}) == ("https", "ssh")
    assert source.allowed_schemes({"SLIPWAY_GIT_ALLOWED_SCHEMES": " HTTPS , file "}) == ("https", "file")
    with pytest.raises(ValueError, match="SLIPWAY_GIT_ALLOWED_SCHEMES: unknown scheme 'ftp'"):
        source.allowed_schemes({"SLIPWAY_GIT_ALLOWED_SCHEMES": "https,ftp"})


def test_the_heuristic_output_is_valid_compose_once_built(tmp_path):
    analysis, document, builds = analyze(tmp_path, {"index.html": "x"})
    built = {**document, "services": {"app": {**{k: v for k, v in document["services"]["app"].items()
                                                  if k != "build"}, "image": "localhost/x:1"}}}
    plan = parse_compose(yaml.safe_dump(built))
    assert plan.components[0].environment == {"PORT": "8080"}
