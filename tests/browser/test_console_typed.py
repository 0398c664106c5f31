"""The submit form of a typed task (issue 31): the task picked from the registered ones, its
payload fields built from its input schema, and the server's 422 shown on the field it names."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import open_page
from tests.e2e.conftest import Runtime

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """As the package's page, but the one 422 this test asks for is not a problem: Chromium
    logs every refused fetch as a console error, and this test submits a bad value on purpose."""
    yield from open_page(browser, lambda message: "status of 422" in message.text and str(
        message.location.get("url", "")).endswith("/jobs"), timeout_ms=None)


def test_a_typed_task_is_submitted_from_fields_and_a_bad_value_is_refused_on_its_field(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    tenant = f"typed-{uuid.uuid4().hex[:8]}"
    page.add_init_script("try { localStorage.setItem('leasehold.tenant', "
                         f"{json.dumps(tenant)}) }} catch {{}}")
    page.goto(console_runtime.url + "/#/jobs")
    page.get_by_text("Submit a job").click()
    form = page.get_by_role("form", name="submit a job")
    # The registered tasks are offered (GET /tasks), Leasehold's own are not.
    expect(page.locator("datalist#task-names option[value='typed-charge']")).to_have_count(1)
    expect(page.locator("datalist#task-names option[value='leasehold.bulk']")).to_have_count(0)

    form.get_by_label("Task").fill("typed-charge")
    expect(form.get_by_role("group", name="Payload of typed-charge")).to_be_visible()
    expect(form.get_by_label("Payload (JSON)")).to_be_hidden()
    amount = form.get_by_label("Amount")
    amount.fill("-5")
    form.get_by_label("Currency (optional)").select_option(label="USD")
    form.get_by_role("button", name="Submit").click()
    status = page.get_by_role("status")
    expect(status).to_contain_text(
        "422 validation_error: payload.amount: Input should be greater than 0")
    expect(amount).to_have_attribute("aria-invalid", "true")
    page.screenshot(path=screenshots / "typed-refused.png", full_page=True)
    assert console_runtime.call("GET", "/jobs", tenant=tenant).body["jobs"] == []

    amount.fill("12")
    form.get_by_label("Express (optional)").check()
    form.get_by_role("button", name="Submit").click()
    expect(status).to_contain_text("Submitted")
    job_id = status.get_by_role("link").inner_text()
    job = console_runtime.wait_for([job_id], {"SUCCEEDED", "DEAD"}, tenant=tenant)[job_id]
    assert job["state"] == "SUCCEEDED", job
    assert job["payload"] == {"amount": 12, "currency": "USD", "express": True}
    assert job["result"] == {"charged": 24, "currency": "USD"}

    # An untyped task keeps the JSON textarea.
    form.get_by_label("Task").fill("echo")
    expect(form.get_by_label("Payload (JSON)")).to_be_visible()
    expect(form.get_by_role("group", name="Payload of typed-charge")).to_have_count(0)
    page.goto("about:blank")
