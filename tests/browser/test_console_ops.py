"""The operator's buttons (issue 31): a long error that fits the jobs table at 1280 px. Real
Chromium over the shared ``leasehold dev``; each test has its own tenant."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import Runtime

pytestmark = pytest.mark.browser


def open_as(page: Page, runtime: Runtime, route: str, tenant: str) -> None:
    """Opens ``#/route`` with every load of this tab as ``tenant`` (picked once, as a person
    would: the page never loads as the default tenant first)."""
    page.add_init_script(f"localStorage.setItem('leasehold.tenant', {json.dumps(tenant)})")
    page.goto(runtime.url + "/#/" + route)


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
    whole = f"GateClosed: the gate {gate.name} is closed"
    page.set_viewport_size({"width": 1280, "height": 800})
    open_as(page, console_runtime, "jobs", tenant)
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=job_id))
    error = row.locator(".clip")
    expect(error).to_have_attribute("title", whole)
    expect(error).to_have_text(whole)  # all of it is there, cut by the style only
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
