"""The job page's Pause, Resume and "Reset from here" in a real Chromium over the shared
``leasehold dev`` (issue 36); each test has its own tenant."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.test_console_ops import open_as
from tests.e2e.conftest import Runtime

pytestmark = pytest.mark.browser


def test_a_waiting_job_is_paused_and_resumed_from_its_page(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    tenant = "console-pause"
    job_id = console_runtime.submit({"task": "await-callback"}, tenant)["job_id"]
    console_runtime.wait_for([job_id], {"SLEEPING"}, tenant=tenant)
    open_as(page, console_runtime, f"jobs/{job_id}", tenant)
    page.get_by_role("button", name="Pause").click()
    expect(page.get_by_role("status")).to_have_text(f"Paused {job_id}.")
    expect(page.locator(".waiting")).to_contain_text("paused since")
    assert console_runtime.job(job_id, tenant)["paused"] is True
    page.screenshot(path=screenshots / "job-paused.png", full_page=True)
    page.get_by_role("button", name="Resume").click()
    expect(page.get_by_role("status")).to_have_text(f"Resumed {job_id}.")
    expect(page.get_by_role("button", name="Pause")).to_be_visible()
    assert console_runtime.job(job_id, tenant)["paused"] is False


def test_a_finished_durable_job_is_reset_from_a_step_and_keeps_the_earlier_one(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    tenant = "console-reset"
    job_id = console_runtime.submit({"task": "two-steps"}, tenant)["job_id"]
    before = console_runtime.wait_for([job_id], tenant=tenant)[job_id]["result"]
    open_as(page, console_runtime, f"jobs/{job_id}", tenant)
    row = page.get_by_role("row").filter(has_text="charge")
    row.get_by_role("button", name="Reset from here").click()
    dialog = page.locator("dialog.confirm")
    expect(dialog.get_by_role("heading")).to_have_text(
        f"Reset job {job_id} from step charge?")
    page.screenshot(path=screenshots / "job-reset-confirm.png", full_page=True)
    dialog.get_by_role("button", name="Reset").click()
    expect(page.get_by_role("status")).to_have_text(f"Reset {job_id} from step charge.")
    history = console_runtime.job(job_id, tenant)["history"]
    assert any(entry["reason"] == "reset from step 'charge'" for entry in history)
    after = console_runtime.wait_for([job_id], tenant=tenant)[job_id]
    assert after["state"] == "SUCCEEDED"
    assert after["result"]["prepare"] == before["prepare"]  # kept its result
    assert after["result"]["charge"] != before["charge"]    # ran again
