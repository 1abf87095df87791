"""Headless Chromium for the browser tests and the frontend benchmark: Debian's
``chromium`` (or ``SLIPWAY_CHROMIUM``) driven by Playwright's Python package. Playwright's
own browser download is never used."""
from __future__ import annotations

import os
import shutil


def chromium_executable() -> str | None:
    """``SLIPWAY_CHROMIUM`` when set, else ``chromium`` on ``PATH``; None when neither."""
    configured = os.environ.get("SLIPWAY_CHROMIUM")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("chromium")


def why_no_browser() -> str | None:
    """Why the browser tests cannot run here (no Playwright, no chromium), or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install -c constraints.txt -e '.[test]')"
    if chromium_executable() is None:
        configured = os.environ.get("SLIPWAY_CHROMIUM")
        if configured:
            return f"SLIPWAY_CHROMIUM={configured} is not an executable"
        return "no chromium on PATH (Debian: apt-get install chromium; or set SLIPWAY_CHROMIUM to a Chromium binary)"
    return None


def launch(playwright):
    """A headless Chromium from ``chromium_executable()``."""
    return playwright.chromium.launch(executable_path=chromium_executable(), headless=True)
