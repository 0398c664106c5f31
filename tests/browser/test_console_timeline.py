"""The job page's timeline (issue 35): a waterfall drawn from the job's own history and
steps, with no collector: queue wait, each attempt, the retry's backoff, the steps."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.test_console import wait_state
from tests.e2e.conftest import Runtime


def test_a_retried_durable_jobs_page_draws_its_attempts_backoff_and_steps(
        page: Page, console_runtime: Runtime, tmp_path: Path, screenshots: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    job_id = console_runtime.submit({"task": "durable-order",
                                     "payload": {"ledger": str(ledger)}})["job_id"]
    wait_state(console_runtime, job_id, {"SUCCEEDED"})
    page.goto(console_runtime.url + f"/#/jobs/{job_id}")
    timeline = page.get_by_role("region", name="Timeline")
    rows = timeline.get_by_role("listitem")
    expect(rows.filter(has_text="queue wait")).to_have_count(1)
    expect(rows.filter(has_text="attempt 1")).to_have_count(1)
    expect(rows.filter(has_text="attempt 2")).to_have_count(1)
    expect(rows.filter(has_text="retry backoff")).to_have_count(1)
    expect(rows.filter(has_text="step charge")).to_have_count(1)
    expect(rows.filter(has_text="step ship")).to_have_count(1)
    expect(rows.filter(has_text="SUCCEEDED")).to_have_count(1)
    # Bars sit on the job's own time axis: the second attempt starts after the first.
    first = rows.filter(has_text="attempt 1").locator(".wf-bar").bounding_box()
    second = rows.filter(has_text="attempt 2").locator(".wf-bar").bounding_box()
    assert first is not None and second is not None and second["x"] >= first["x"]
    page.screenshot(path=screenshots / "timeline.png", full_page=True)
