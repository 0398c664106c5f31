"""The jobs page's "Call a URL" (issue 33): a job with no code submitted from the console, run
against a local server (``leasehold dev`` lets targets reach loopback), and a refused target's
422 shown naming its field, with nothing written."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import open_page
from tests.e2e.conftest import Runtime
from tests.integration.target_server import Server, serve

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """As the package's page, but the one 422 this test asks for is not a problem (Chromium
    logs every refused fetch as a console error)."""
    yield from open_page(browser, lambda message: "status of 422" in message.text and str(
        message.location.get("url", "")).endswith("/jobs"), timeout_ms=None)


@pytest.fixture
def server() -> Iterator[Server]:
    running = serve()
    yield next(running)
    running.close()


def test_a_url_is_called_from_the_console_and_a_refused_target_names_its_field(
        page: Page, console_runtime: Runtime, server: Server, screenshots: Path) -> None:
    tenant = f"targets-{uuid.uuid4().hex[:8]}"
    page.add_init_script("try { localStorage.setItem('leasehold.tenant', "
                         f"{json.dumps(tenant)}) }} catch {{}}")
    page.goto(console_runtime.url + "/#/jobs")
    page.get_by_text("Call a URL").click()
    form = page.get_by_role("form", name="call a URL")
    status = page.get_by_role("status")

    form.get_by_label("URL").fill("file:///etc/passwd")
    form.get_by_role("button", name="Call").click()
    expect(status).to_contain_text("422")
    expect(status).to_contain_text("target.http.url")
    assert console_runtime.call("GET", "/jobs", tenant=tenant).body["jobs"] == []

    form.get_by_label("URL").fill(server.url + "/orders")
    form.get_by_label("Method").select_option("PUT")
    form.get_by_label("Body (JSON)").fill('{"id": 7}')
    form.get_by_role("button", name="Call").click()
    expect(status).to_contain_text("Submitted")
    job_id = status.get_by_role("link").inner_text()
    job = console_runtime.wait_for([job_id], {"SUCCEEDED", "DEAD"}, tenant=tenant)[job_id]
    page.screenshot(path=screenshots / "target-called.png", full_page=True)
    assert job["state"] == "SUCCEEDED", job
    assert job["result"]["status"] == 200 and job["result"]["body"] == {"ok": True}
    [request] = server.requests
    assert (request.method, request.path, json.loads(request.body)) == ("PUT", "/orders", {"id": 7})
