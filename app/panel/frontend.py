"""The web frontend: ``GET /`` and the client-side routes answer ``app/web/index.html``;
``GET /assets/<path>`` answers a file under ``app/web/assets``.

The files are read once, at start-up, into a table keyed by their path relative to
``assets`` (regular files only, no dot-files, nothing whose real path leaves the
directory: a symlink out of it is never served). A request is a lookup in that table, so
no form of path escape (``..``, ``%2e%2e``, an absolute path, a backslash, NUL, a
symlink) can reach another file: it is not a key and answers 404. Changing the files
needs a restart of the server.

Every path that is not under ``/api``, ``/v1``, ``/assets``, ``/healthz``, ``/readyz``
or ``/metrics`` answers the page to GET and HEAD (the page's router shows the route),
405 to other methods. The page carries ``<meta name="slipway-oidc" content="on|off">``
(the server replaces the literal ``content="{{oidc}}"`` of ``index.html``), so the
page knows whether OIDC login is configured without a request.
"""
from __future__ import annotations

import hashlib
import mimetypes
import os
import re
from dataclasses import dataclass
from pathlib import Path

import falcon

from app.http.errors import ApiError

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
CSP = ("default-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
       "base-uri 'none'; form-action 'self'")
SECURITY_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "same-origin"}
#: paths the page never answers (the APIs, the assets, the probes)
RESERVED = ("api", "v1", "assets", "healthz", "readyz", "metrics")
PAGE_PATHS = re.compile(r"^/(?!(?:" + "|".join(RESERVED) + r")(?:/|$))")
ASSET_PATHS = re.compile(r"^/assets(?:/|$)")
OIDC_PLACEHOLDER = 'content="{{oidc}}"'
TYPES = {
    ".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8", ".html": "text/html; charset=utf-8",
    ".json": "application/json", ".map": "application/json", ".svg": "image/svg+xml",
    ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
    ".webp": "image/webp", ".ico": "image/x-icon", ".woff2": "font/woff2", ".woff": "font/woff",
    ".txt": "text/plain; charset=utf-8", ".md": "text/plain; charset=utf-8", "": "text/plain; charset=utf-8",
}
MAX_FILES = 10_000  # a directory beyond this is a mistake (e.g. node_modules), not a frontend


@dataclass(frozen=True)
class File:
    body: bytes
    content_type: str
    etag: str


def _file(body: bytes, content_type: str) -> File:
    return File(body=body, content_type=content_type, etag='"' + hashlib.sha256(body).hexdigest()[:32] + '"')


def content_type_of(name: str) -> str:
    suffix = os.path.splitext(name)[1].lower()
    if suffix in TYPES:
        return TYPES[suffix]
    guessed = mimetypes.guess_type(name)[0]
    return guessed or "application/octet-stream"


def load_assets(root: Path) -> dict[str, File]:
    """``{relative path: File}`` of the regular files under ``root`` whose real path stays
    inside it; dot-files and dot-directories are left out."""
    table: dict[str, File] = {}
    if not root.is_dir():
        return table
    real_root = os.path.realpath(root)
    for directory, dirs, files in os.walk(real_root):  # does not descend into symlinked directories
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = os.path.join(directory, name)
            real = os.path.realpath(path)
            if os.path.commonpath([real_root, real]) != real_root or not os.path.isfile(real):
                continue
            relative = os.path.relpath(path, real_root).replace(os.sep, "/")
            with open(real, "rb") as handle:
                table[relative] = _file(handle.read(), content_type_of(name))
            if len(table) > MAX_FILES:
                raise RuntimeError(f"{root} holds more than {MAX_FILES} files: not a frontend")
    return table


def load_page(web_dir: Path, oidc: bool) -> File:
    index = web_dir / "index.html"
    try:
        text = index.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
                f'<meta name="slipway-oidc" {OIDC_PLACEHOLDER}><title>Slipway</title></head>'
                "<body><p>The web frontend is not installed (no index.html).</p></body></html>")
    text = text.replace(OIDC_PLACEHOLDER, 'content="on"' if oidc else 'content="off"')
    return _file(text.encode("utf-8"), "text/html; charset=utf-8")


def _answer(req, resp, file: File, cache: str) -> None:
    if req.method not in ("GET", "HEAD"):
        raise ApiError(405, f"{req.method} is not allowed here: GET or HEAD", headers={"Allow": "GET, HEAD"})
    resp.set_headers(SECURITY_HEADERS)
    resp.set_header("Cache-Control", cache)
    resp.set_header("ETag", file.etag)
    resp.content_type = file.content_type
    wanted = req.get_header("If-None-Match")
    if wanted and file.etag in [tag.strip() for tag in wanted.split(",")]:
        resp.status = falcon.HTTP_304
        return
    resp.data = file.body


class Frontend:
    """The page and its assets; ``add_to(app)`` routes them."""

    def __init__(self, web_dir: Path | None = None, *, oidc: bool = False):
        self.web_dir = Path(web_dir) if web_dir else WEB_DIR
        self.page = load_page(self.web_dir, oidc)
        self.assets = load_assets(self.web_dir / "assets")

    async def serve_page(self, req, resp, ws=None, **_):
        if ws is not None:
            raise falcon.HTTPNotFound()
        # the page changes with a release (and with the OIDC setting): always revalidate
        _answer(req, resp, self.page, "no-cache")

    async def serve_asset(self, req, resp, ws=None, **_):
        if ws is not None:
            raise falcon.HTTPNotFound()
        name = req.path[len("/assets/"):] if req.path.startswith("/assets/") else ""
        file = self.assets.get(name)
        if file is None:
            raise ApiError(404, "no such asset")
        # file names carry no version: revalidate (a 304 when unchanged, by ETag)
        _answer(req, resp, file, "no-cache")

    def add_to(self, app) -> None:
        app.add_sink(self.serve_page, prefix=PAGE_PATHS)
        app.add_sink(self.serve_asset, prefix=ASSET_PATHS)
