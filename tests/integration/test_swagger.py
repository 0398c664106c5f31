"""Swagger UI at /docs, over the same OpenAPI document as /openapi.json (issue 25)."""

from __future__ import annotations

import json
from pathlib import Path

from leasehold.lifecycle.app import Leasehold

from .api_client import ApiClient


def test_docs_serves_swagger_ui_and_its_document_is_the_committed_one(app: Leasehold) -> None:
    api = ApiClient(app)
    page = api.get("/docs")
    assert page.status == 200
    assert "text/html" in page.headers.get("Content-Type", "")
    assert "SwaggerUIBundle" in page.body and "Leasehold" in page.body
    document = api.get("/docs?format=json")
    assert document.status == 200
    served = document.body if isinstance(document.body, dict) else json.loads(document.body)
    committed = json.loads((Path(__file__).parents[2] / "docs" / "openapi.json").read_text())
    assert served["paths"].keys() == committed["paths"].keys()
    assert "/jobs/bulk" in served["paths"] and "/docs" not in served["paths"]
