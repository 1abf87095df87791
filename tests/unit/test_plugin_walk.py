"""The walk through the example deploy method on docs/plugins.md ("A deploy method of your
own") is the package's code: the blocks marked ``<!-- walk: PATH -->``, in order, are the
file PATH line for line (blank lines aside), and the walk's Python, run on its own, plans
as the package does. So the page cannot drift from examples/slipway-deploy-image."""
from __future__ import annotations

import re
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

from core.errors import Invalid
from ports.settings import Settings
from tests.support.image_plugin import image_plugin

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "plugins.md"
PACKAGE = "examples/slipway-deploy-image"
MODULE = f"{PACKAGE}/slipway_deploy_image/__init__.py"
WALKED = re.compile(r"^<!-- walk: (\S+) -->\n```[a-z]*\n(.*?)\n```$", re.DOTALL | re.MULTILINE)


def _walk() -> dict:
    blocks = defaultdict(list)
    for path, code in WALKED.findall(PAGE.read_text(encoding="utf-8")):
        blocks[path].append(code)
    return blocks


def _lines(text: str) -> list:
    return [line for line in text.splitlines() if line.strip()]


def test_the_walk_shows_every_file_of_the_package_that_has_code():
    assert set(_walk()) == {f"{PACKAGE}/pyproject.toml", MODULE}
    assert len(_walk()[MODULE]) >= 5  # a walk, not one listing


@pytest.mark.parametrize("path", [f"{PACKAGE}/pyproject.toml", MODULE])
def test_each_walked_file_is_the_packages_file(path):
    walked = _lines("\n".join(_walk()[path]))
    actual = _lines((ROOT / path).read_text(encoding="utf-8"))
    assert walked == actual, f"docs/plugins.md's walk of {path} differs from the file: copy the file's code there"


def test_the_walked_metadata_registers_the_module_in_slipways_group():
    metadata = tomllib.loads("\n".join(_walk()[f"{PACKAGE}/pyproject.toml"]))
    assert metadata["project"]["entry-points"]["slipway"] == {"deploy_image": "slipway_deploy_image"}
    assert metadata["tool"]["setuptools"]["packages"] == ["slipway_deploy_image"]


def test_the_walked_code_runs_and_plans_as_the_package_does():
    namespace = {"__name__": "walked_image_method"}
    exec(compile("\n\n".join(_walk()[MODULE]), "docs/plugins.md", "exec"), namespace)  # our own page: its code is the package's
    [walked_factory] = namespace["register_deploy_methods"]()
    [packaged_factory] = image_plugin().register_deploy_methods()
    walked, packaged = walked_factory.create(Settings()), packaged_factory.create(Settings())
    request = {"image": "localhost/busybox:latest", "port": 8080, "command": ["sh", "-c", "echo $HOME"]}
    assert walked.name == packaged.name == "image"
    assert walked.request_schema == packaged.request_schema
    assert walked.plan(request, {}) == packaged.plan(request, {})
    with pytest.raises(Invalid) as refused:
        walked.plan({"image": "oci-archive:x"}, {})
    assert set(refused.value.fields) == {"image"}
