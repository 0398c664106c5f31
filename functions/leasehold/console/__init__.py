"""The web console: static HTML, JS and CSS shipped in the package (``static/``).

The API serves them (``GET /`` and ``GET /console/<file>``, :mod:`leasehold.api.console`), and so
does ``leasehold console`` (:mod:`leasehold.cli.console`), which also signs the API calls it
forwards. The page calls the JSON API with ``fetch`` at paths relative to itself, so it works at
the root of ``leasehold dev`` and under an API Gateway stage alike. No build step: plain JS
modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

INDEX = "index.html"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
#: The page loads only its own files and talks only to its own origin (no inline script, so a
#: job payload shown on it can never run as code), and may not be framed.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Small files; revalidating each load means an upgrade is seen at once.
    "Cache-Control": "no-cache",
}


@dataclass(frozen=True)
class Asset:
    name: str
    body: bytes
    content_type: str


@cache
def assets() -> dict[str, Asset]:
    """Every file the console serves, by name (a fixed set: no path from a request is opened)."""
    found: dict[str, Asset] = {}
    for entry in resources.files(__name__).joinpath("static").iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in CONTENT_TYPES:
            found[entry.name] = Asset(entry.name, entry.read_bytes(), CONTENT_TYPES[suffix])
    return found


def asset(name: str) -> Asset | None:
    """The named file (``index.html`` for the page itself), or None."""
    return assets().get(name)


def route(path: str) -> Asset | None:
    """The asset a request path asks for: ``/`` is the page, ``/console/<name>`` its files.

    Both the API and ``leasehold console`` route through here so they serve the same set.
    """
    if path in ("/", "", "/console", "/console/"):
        return asset(INDEX)
    prefix, _, name = path.partition("/console/")
    if prefix or "/" in name:
        return None
    return asset(name)
