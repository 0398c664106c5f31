"""The API serves the console: the page at ``/``, its files at ``/console/<name>``."""

from __future__ import annotations

from leasehold.api.context import ApiConfig
from leasehold.lifecycle.app import Leasehold

from .api_client import ApiClient


def test_the_page_and_its_files_are_served_without_an_identity(app: Leasehold) -> None:
    # As behind API Gateway (no tenant header trusted): static files hold no tenant's data.
    api = ApiClient(app, ApiConfig(trust_tenant_header=False))
    page = api.get("/")
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    assert '<script type="module" src="console/app.js">' in page.body
    assert "script-src" not in page.headers["Content-Security-Policy"]  # 'self' only, no inline
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    script = api.get("/console/app.js")
    assert script.status == 200 and script.headers["Content-Type"].startswith("text/javascript")
    assert "hashchange" in script.body
    assert api.get("/console/style.css").headers["Content-Type"].startswith("text/css")
    # The JSON API beside it still wants an identity.
    assert api.get("/jobs").status == 401


def test_only_the_consoles_own_files_are_served(app: Leasehold) -> None:
    api = ApiClient(app)
    for path in ("/console/nope.js", "/console/__init__.py", "/console/..%2F__init__.py",
                 "/console/static", "/console/a/app.js"):
        reply = api.get(path)
        assert reply.status == 404, path
        assert reply.body["error"]["code"] == "not_found"
