"""The example deploy method ``image`` (``examples/slipway-deploy-image``) for the tests that
run it in process: its package imported from the example's folder, the files pip would
install (``tests/e2e/test_image_plugin.py`` installs it with pip)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "slipway-deploy-image"
PACKAGE = "slipway_deploy_image"


def image_plugin():
    """The package ``slipway_deploy_image``: a plugin object for ``Config(plugins=...)``."""
    if PACKAGE in sys.modules:
        return sys.modules[PACKAGE]
    folder = EXAMPLE / PACKAGE
    spec = importlib.util.spec_from_file_location(PACKAGE, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = module
    spec.loader.exec_module(module)
    return module
