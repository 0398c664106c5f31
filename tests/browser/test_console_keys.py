"""The console's Keys page in a real Chromium over a real ``leasehold dev`` (issue 22): a
concurrency key in use of its limit, the job waiting for its slot (and why, on the job's
page), and Pause and Resume that the API then reports."""

from __future__ import annotations

import json
import time
import urllib.parse
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import Runtime

pytestmark = pytest.mark.browser

KEY = "acct/1"  # a slash: the key is one path segment, percent-encoded


def test_a_key_shows_its_slot_and_waiting_job_and_pauses_and_resumes(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    tenant = f"keys-{uuid.uuid4().hex[:8]}"
    body = {"task": "sleep", "payload": {"seconds": 20},
            "concurrency": {"key": KEY, "limit": 1}}
    first = console_runtime.submit(body, tenant)["job_id"]
    second = console_runtime.submit(body, tenant)["job_id"]
    deadline = time.monotonic() + 60
    while "RUNNING" not in {console_runtime.job(j, tenant)["state"] for j in (first, second)}:
        assert time.monotonic() < deadline, "one job should run"
        time.sleep(0.2)
    path = f"/flow/keys/{urllib.parse.quote(KEY, safe='')}"
    # (about:blank, at the end, has no storage: the script must not throw there)
    page.add_init_script("try { localStorage.setItem('leasehold.tenant', "
                         f"{json.dumps(tenant)}) }} catch {{}}")
    page.goto(console_runtime.url + "/#/keys")
    row = page.get_by_role("row").filter(has_text=KEY)
    expect(row).to_contain_text("1 of 1")
    page.screenshot(path=screenshots / "keys.png", full_page=True)
    waiting = console_runtime.call("GET", path, tenant=tenant).body["waiting_jobs"]
    if waiting:  # parked by now (on a loaded machine it may still be on its way there)
        expect(row.get_by_role("link", name=waiting[0])).to_be_visible()
        row.get_by_role("link", name=waiting[0]).click()
        expect(page.locator(".waiting")).to_contain_text(KEY)

    page.goto(console_runtime.url + "/#/keys")
    page.get_by_role("button", name=f"pause {KEY}").click()
    dialog = page.locator("dialog.confirm")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Pause").click()
    expect(page.get_by_role("status")).to_have_text(f"Key {KEY} paused.")
    assert console_runtime.call("GET", path, tenant=tenant).body["paused"] is True
    # Another tenant's key of the same name is its own.
    assert console_runtime.call("GET", path, tenant=tenant + "-other").body["paused"] is False

    page.get_by_role("button", name=f"resume {KEY}").click()
    expect(page.get_by_role("status")).to_have_text(f"Key {KEY} resumed.")
    assert console_runtime.call("GET", path, tenant=tenant).body["paused"] is False
    page.goto("about:blank")  # no refresh left running when the runtime is shared on


def test_the_submit_form_takes_flow_options_and_says_when_a_unique_key_answers(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    """Flow control from the Jobs page's form: a concurrency key and a unique key reach the
    job (its key's slot is taken while it runs), and the same unique key submitted again is
    answered by the live job, which the form says instead of "Submitted"."""
    tenant = f"form-{uuid.uuid4().hex[:8]}"
    page.add_init_script("try { localStorage.setItem('leasehold.tenant', "
                         f"{json.dumps(tenant)}) }} catch {{}}")
    page.goto(console_runtime.url + "/#/jobs")
    page.get_by_text("Submit a job").click()
    form = page.get_by_role("form", name="submit a job")

    def fill() -> None:
        form.get_by_label("Task").fill("sleep")
        form.get_by_label("Payload (JSON)").fill('{"seconds": 20}')
        if not form.get_by_label("Concurrency key").is_visible():
            form.get_by_text("Flow control").click()
        form.get_by_label("Concurrency key").fill("acct-9")
        form.get_by_label("Concurrency limit").fill("1")
        form.get_by_label("Unique key").fill("import:file-1")
        form.get_by_label("Start within (s)").fill("600")

    fill()
    page.screenshot(path=screenshots / "submit-flow.png", full_page=True)
    form.get_by_role("button", name="Submit").click()
    status = page.get_by_role("status")
    expect(status).to_contain_text("Submitted")
    job_id = status.get_by_role("link").inner_text()
    try:
        console_runtime.wait_for([job_id], {"RUNNING"}, tenant=tenant)
        usage = console_runtime.call("GET", "/flow/keys/acct-9", tenant=tenant).body
        assert usage["in_use"] == 1 and usage["limit"] == 1, usage

        fill()
        form.get_by_role("button", name="Submit").click()
        expect(status).to_contain_text("is live with that unique key")
        assert status.get_by_role("link").inner_text() == job_id
        listed = console_runtime.call("GET", "/jobs", tenant=tenant).body["jobs"]
        assert [j["job_id"] for j in listed] == [job_id]  # no second job
        status.get_by_role("link").click()  # the job's page says what it runs under
        flow = page.locator("span.flow")
        expect(flow).to_contain_text("concurrency acct-9 (limit 1)")
        expect(flow).to_contain_text("unique import:file-1")
        expect(flow).not_to_contain_text("start by")  # a started job never expires
        page.screenshot(path=screenshots / "job-flow.png", full_page=True)
    finally:
        console_runtime.call("DELETE", f"/jobs/{job_id}", tenant=tenant)
        page.goto("about:blank")
