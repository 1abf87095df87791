"""Plugins: built-ins through the entry points, a third-party package installed by pip (the
example deploy method ``image``, examples/slipway-deploy-image)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.pluginmanager import PluginError, deploy_methods, make_plugin_manager
from ports import hookimpl

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "slipway-deploy-image"


def test_builtins_come_through_the_entry_point_group():
    pm = make_plugin_manager()
    names = {name for name, _ in pm.list_name_plugin()}
    assert {"billing_metered", "deploy_template", "deploy_compose", "deploy_git", "deploy_ai"} <= names
    assert {d.project_name for _, d in pm.list_plugin_distinfo()} == {"slipway"}
    assert set(deploy_methods(pm)) == {"template", "compose", "git", "ai"}


def test_a_misspelled_hook_fails_loudly():
    class Typo:
        @hookimpl
        def register_deploy_method(self):  # missing "s"
            return []

    with pytest.raises(Exception, match="unknown hook"):
        make_plugin_manager([Typo()], load_entrypoints=False)


def test_two_plugins_claiming_one_name_is_an_error():
    from plugins import deploy_git

    class Again:
        @hookimpl
        def register_deploy_methods(self):
            return [deploy_git.GitFactory()]

    with pytest.raises(PluginError, match="git"):
        deploy_methods(make_plugin_manager([Again()]))


def test_a_pip_installed_third_party_plugin_is_loaded(tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(EXAMPLE)], check=True, capture_output=True, text=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), str(ROOT)]))
    out = subprocess.run([sys.executable, "-m", "app.cli.main", "plugins"], env=env, capture_output=True, text=True,
                         check=True).stdout
    document = json.loads(out)
    image = next(p for p in document["plugins"] if p["name"] == "deploy_image")
    assert image["distribution"] == "slipway-deploy-image" and image["version"] == "1.0.0"
    assert image["hooks"] == ["register_deploy_methods"]
    assert "image" in document["deployMethods"]
    assert document["runtimes"] == ["docker", "podman", "swarm"] and document["analyzers"] == ["heuristic", "llm"]
    assert (document["routeProviders"], document["eventBuses"], document["backupDestinations"]) == (
        ["caddy", "file"], ["memory", "postgres"], ["local", "s3"])
    assert document["rateStores"] == ["memory", "redis", "rediss"]
    assert document["gitProviders"] == ["bitbucket", "gitea", "github", "gitlab"]
    assert {"postgres", "mariadb", "redis", "wordpress"} <= set(document["templates"])


def test_register_billing_models_provides_the_metered_model():
    from app.pluginmanager import billing_models

    pm = make_plugin_manager()
    results = pm.hook.register_billing_models()
    assert [m.name for batch in results for m in batch] == ["per_instance_metered"]
    assert set(billing_models(pm)) == {"per_instance_metered"}
