"""The operator's buttons (issue 31): bulk actions on the jobs page's filter (a dry-run count,
a confirmation naming it, the bulk job followed to its end), Retry on a workflow, and a long
error that fits the jobs table at 1280 px. Real Chromium over the shared ``leasehold dev``;
each test has its own tenant."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import open_page
from tests.e2e.conftest import Runtime

pytestmark = pytest.mark.browser


def open_as(page: Page, runtime: Runtime, route: str, tenant: str) -> None:
    """Opens ``#/route`` with every load of this tab as ``tenant`` (picked once, as a person
    would: the page never loads as the default tenant first)."""
    page.add_init_script(f"localStorage.setItem('leasehold.tenant', {json.dumps(tenant)})")
    page.goto(runtime.url + "/#/" + route)


@pytest.fixture
def page_refused(browser: Browser) -> Iterator[Page]:
    """A page on which the API's 409 to a workflow retry is expected (Chromium logs every
    failed fetch as an error); any other logged error or a script that throws fails."""
    yield from open_page(browser, lambda message: "status of 409" in message.text and str(
        message.location["url"]).endswith("/retry"), timeout_ms=None)


def history_reasons(runtime: Runtime, job_id: str, tenant: str) -> list[str]:
    return [entry["reason"] or "" for entry in runtime.job(job_id, tenant)["history"]]


def overflow(page: Page, selector: str) -> dict[str, Any]:
    """How wide ``selector``'s content is against its box (the page's: ``html``)."""
    found: dict[str, Any] = page.eval_on_selector(
        selector, "el => ({scroll: el.scrollWidth, client: el.clientWidth})")
    return found


def test_a_long_error_fits_the_jobs_table_at_1280_px_whole_on_hover_and_on_a_click(
        page: Page, console_runtime: Runtime, screenshots: Path, tmp_path: Path) -> None:
    tenant = "console-wide"
    # The gate task's error names its file: 200 characters without a space to break at.
    gate = tmp_path / ("closed-" + "x" * 200)
    job_id = console_runtime.submit({"task": "gate", "payload": {"path": str(gate)},
                                     "max_attempts": 1}, tenant)["job_id"]
    console_runtime.wait_for([job_id], {"DEAD"}, tenant=tenant)
    message = f"the gate {gate.name} is closed"
    # A listing shows the excerpt the row keeps (issue 46: 80 characters, here all of them
    # without a space); the job's page shows the error whole, read from its kept item.
    excerpt = f"GateClosed: {message[:80]}"
    page.set_viewport_size({"width": 1280, "height": 800})
    open_as(page, console_runtime, "jobs", tenant)
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=job_id))
    error = row.locator(".clip")
    expect(error).to_have_attribute("title", excerpt)
    expect(error).to_have_text(excerpt)  # all of it is there, cut by the style only
    # Neither the page nor the table's own box scrolls sideways: the column fits.
    assert overflow(page, "html")["scroll"] <= overflow(page, "html")["client"]
    table = overflow(page, "main .results .scroll")
    assert table["scroll"] <= table["client"], table
    cut = error.evaluate("el => ({scroll: el.scrollWidth, client: el.clientWidth})")
    assert cut["client"] < cut["scroll"], cut  # shown with an ellipsis
    page.screenshot(path=screenshots / "long-error-1280.png", full_page=True)
    error.click()  # unfolds it, wrapped inside the column
    expect(error).to_have_attribute("aria-expanded", "true")
    unfolded = error.evaluate("el => ({scroll: el.scrollWidth, client: el.clientWidth})")
    assert unfolded["scroll"] <= unfolded["client"], unfolded
    table = overflow(page, "main .results .scroll")
    assert table["scroll"] <= table["client"], table
    assert overflow(page, "html")["scroll"] <= overflow(page, "html")["client"]
    open_as(page, console_runtime, f"jobs/{job_id}", tenant)
    expect(page.locator("main")).to_contain_text(message)


def test_a_bulk_retry_counts_first_confirms_that_count_and_follows_the_bulk_job(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    tenant = "console-bulk-retry"
    dead = [console_runtime.submit({"task": "fail", "max_attempts": 1}, tenant)["job_id"]
            for _ in range(3)]
    console_runtime.wait_for(dead, {"DEAD"}, tenant=tenant)
    open_as(page, console_runtime, "jobs?state=DEAD&task=fail", tenant)
    bar = page.get_by_role("group", name="Bulk actions")
    bar.get_by_text("Bulk actions on this filter").click()
    action = bar.get_by_label("bulk action")
    # A DEAD filter: retry and delete apply, cancel (live jobs only) is not offered.
    expect(action.locator("option")).to_have_text(["Retry", "Delete"])
    expect(bar).to_contain_text("state DEAD · task fail")
    bar.get_by_role("button", name="Count").click()
    expect(bar.get_by_test_id("bulk-count")).to_have_text("3 jobs")
    expect(bar).to_contain_text("3 jobs would be retried")
    # A job that dies after the count is not among the counted, and is left alone.
    late = console_runtime.submit({"task": "fail", "max_attempts": 1}, tenant)["job_id"]
    console_runtime.wait_for([late], {"DEAD"}, tenant=tenant)
    bar.get_by_role("button", name="Retry 3 jobs…").click()
    dialog = page.locator("dialog.confirm")
    expect(dialog.get_by_role("heading")).to_have_text("Retry 3 jobs?")
    expect(dialog).to_contain_text("jobs submitted since are left alone")
    page.screenshot(path=screenshots / "bulk-confirm.png", full_page=True)
    dialog.get_by_role("button", name="Retry 3 jobs").click()
    progress = bar.get_by_test_id("bulk-progress")
    expect(progress).to_contain_text("SUCCEEDED: 3 retried, 0 skipped", timeout=30_000)
    page.screenshot(path=screenshots / "bulk-done.png", full_page=True)
    for job_id in dead:
        assert "bulk retry" in history_reasons(console_runtime, job_id, tenant)
    assert "bulk retry" not in history_reasons(console_runtime, late, tenant)


def test_bulk_cancel_and_delete_offer_what_the_filter_allows_and_keep_a_workflows_step(
        page: Page, console_runtime: Runtime) -> None:
    tenant = "console-bulk-cd"
    later = [console_runtime.submit({"task": "echo", "payload": i, "delay_seconds": 3600},
                                    tenant)["job_id"] for i in range(2)]
    flow = console_runtime.call("POST", "/workflows", {"steps": [
        {"id": "only", "task": "echo", "payload": "kept"}]}, tenant=tenant)
    assert flow.status == 201, flow.body
    step_job = flow.body["steps"][0]["job_id"]
    console_runtime.wait_for([step_job], {"SUCCEEDED"}, tenant=tenant)
    # Another tenant's delayed job matches the same filter and is never counted or touched.
    rival = console_runtime.submit({"task": "echo", "delay_seconds": 3600}, "console-rival")
    open_as(page, console_runtime, "jobs?state=SCHEDULED", tenant)
    bar = page.get_by_role("group", name="Bulk actions")
    bar.get_by_text("Bulk actions on this filter").click()
    expect(bar.get_by_label("bulk action").locator("option")).to_have_text(["Cancel"])
    bar.get_by_role("button", name="Count").click()
    expect(bar.get_by_test_id("bulk-count")).to_have_text("2 jobs")
    bar.get_by_role("button", name="Cancel 2 jobs…").click()
    page.locator("dialog.confirm").get_by_role("button", name="Cancel 2 jobs").click()
    expect(bar.get_by_test_id("bulk-progress")).to_contain_text(
        "SUCCEEDED: 2 cancelled, 0 skipped", timeout=30_000)
    # The table reloads when the bulk job ends: the cancelled jobs are no longer SCHEDULED.
    expect(page.get_by_text("No jobs match.")).to_be_visible()

    page.goto(console_runtime.url + "/#/jobs")  # the same tenant (kept); no filter at all
    bar = page.get_by_role("group", name="Bulk actions")
    bar.get_by_text("Bulk actions on this filter").click()
    action = bar.get_by_label("bulk action")
    expect(action.locator("option")).to_have_text(["Retry", "Cancel", "Delete"])
    action.select_option("delete")
    bar.get_by_role("button", name="Count").click()
    # The workflow's step is finished too, but its workflow still reads it: kept, and said.
    expect(bar.get_by_test_id("bulk-count")).to_have_text("2 jobs")
    expect(bar).to_contain_text("1 more kept because still referenced: 1 by a workflow")
    bar.get_by_role("button", name="Delete 2 jobs…").click()
    dialog = page.locator("dialog.confirm")
    expect(dialog).to_contain_text("Their rows are removed for good")
    dialog.get_by_role("button", name="Delete 2 jobs").click()
    expect(bar.get_by_test_id("bulk-progress")).to_contain_text(
        re.compile(r"SUCCEEDED: 2 deleted, 0 skipped, kept because still referenced: "
                   r"1 by a workflow"), timeout=30_000)
    for job_id in later:
        assert console_runtime.call("GET", f"/jobs/{job_id}", tenant=tenant).status == 404
    assert console_runtime.job(step_job, tenant)["state"] == "SUCCEEDED"
    assert console_runtime.job(rival["job_id"], "console-rival")["state"] == "SCHEDULED"


def test_a_workflows_retry_reruns_its_failed_step_and_a_refused_retry_says_why(
        page_refused: Page, console_runtime: Runtime, screenshots: Path, tmp_path: Path) -> None:
    page = page_refused
    tenant = "console-wf-retry"
    gate = tmp_path / "wf-gate"
    reply = console_runtime.call("POST", "/workflows", {"name": "gated", "steps": [
        {"id": "gate", "task": "gate", "payload": {"path": str(gate)}, "max_attempts": 1}]},
        tenant=tenant)
    assert reply.status == 201, reply.body
    workflow_id, step_job = reply.body["workflow_id"], reply.body["steps"][0]["job_id"]

    def wait_workflow(state: str) -> None:
        deadline = time.monotonic() + 30
        while (now := console_runtime.call("GET", f"/workflows/{workflow_id}",
                                           tenant=tenant).body["state"]) != state:
            assert time.monotonic() < deadline, f"workflow still {now}, not {state}"
            time.sleep(0.2)

    console_runtime.wait_for([step_job], {"DEAD"}, tenant=tenant)
    open_as(page, console_runtime, f"workflows/{workflow_id}", tenant)
    actions = page.locator("main .actions").first
    expect(actions.locator(".badge")).to_have_text("FAILED")
    page.get_by_role("button", name="Retry workflow").click()
    # The page says so once it has redrawn the workflow: the step was queued again; the gate
    # is still closed, so it dies again, and the page, polling the RUNNING workflow, shows
    # it FAILED again.
    expect(page.get_by_role("status")).to_contain_text(f"Retried workflow {workflow_id}")
    assert "workflow retry" in history_reasons(console_runtime, step_job, tenant)
    console_runtime.wait_for([step_job], {"DEAD"}, tenant=tenant)
    expect(actions.locator(".badge")).to_have_text("FAILED", timeout=30_000)
    deaths = [e for e in console_runtime.job(step_job, tenant)["history"] if e["to"] == "DEAD"]
    assert len(deaths) == 2

    # Someone else retries it (the gate now open) while this page still shows it FAILED: the
    # page's Retry is refused with the API's reason, and the page then shows it as it is.
    gate.touch()
    again = console_runtime.call("POST", f"/workflows/{workflow_id}/retry", tenant=tenant)
    assert again.status == 200, again.body
    wait_workflow("SUCCEEDED")  # its step succeeded, and the workflow settled
    expect(actions.locator(".badge")).to_have_text("FAILED")  # a settled page is not polled
    page.get_by_role("button", name="Retry workflow").click()
    expect(page.get_by_role("status")).to_contain_text(
        f"409 conflict: workflow {workflow_id} is SUCCEEDED; only a FAILED or CANCELLED one "
        "can be retried")
    expect(actions.locator(".badge")).to_have_text("SUCCEEDED")
    expect(page.get_by_role("button", name="Retry workflow")).to_be_disabled()
    expect(page.get_by_test_id("retry-reason")).to_have_attribute(
        "title", "Only a FAILED or CANCELLED workflow can be retried; this one is SUCCEEDED.")
    page.screenshot(path=screenshots / "workflow-retry-refused.png", full_page=True)
    # The jobs page filtered by the workflow says bulk actions are not for its steps.
    page.goto(console_runtime.url + f"/#/jobs?workflow={workflow_id}")
    bar = page.get_by_role("group", name="Bulk actions")
    bar.get_by_text("Bulk actions on this filter").click()
    expect(bar).to_contain_text("not a schedule's runs or a workflow's steps")
    expect(bar.get_by_label("bulk action")).to_have_count(0)
