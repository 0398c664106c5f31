"""The console's on-call pages in a real Chromium over a real ``leasehold dev``.

A 404 page for unknown ids, a confirmation before every destructive action, Overview cards
that agree with each other, a 390 px layout, schedule create/edit/delete, the Triggers and
Workers pages, search, the "due in" and duration columns and the submit form. Each test saves
screenshots into its pytest tmp folder (``$LEASEHOLD_SCREENSHOTS`` keeps them elsewhere).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from tests.e2e.conftest import Runtime

pytestmark = pytest.mark.browser


def as_tenant(page: Page, tenant: str) -> None:
    """Every page load of this tab uses ``tenant`` (as if picked once in the header)."""
    page.add_init_script(f"localStorage.setItem('leasehold.tenant', {json.dumps(tenant)})")


def fresh_tenant(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def confirm_dialog(page: Page) -> Locator:
    dialog = page.locator("dialog.confirm")
    expect(dialog).to_be_visible()
    return dialog


def created(reply: Any) -> dict[str, Any]:
    assert reply.status == 201, reply.body
    body: dict[str, Any] = reply.body
    return body


@pytest.fixture
def tolerant_page(browser: Browser) -> Iterator[Page]:
    """A page whose 404 answers may be logged (Chromium logs every failed fetch as an error);
    a script that throws still fails the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert not errors, errors


def test_an_unknown_job_or_workflow_id_shows_a_not_found_page(
        tolerant_page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    page = tolerant_page
    page.goto(console_runtime.url + "/#/jobs/01NOSUCHJOB000000000000000")
    expect(page.get_by_role("heading", name="No such job")).to_be_visible()
    expect(page.get_by_role("region", name="not found")).to_contain_text(
        "There is no job 01NOSUCHJOB000000000000000 for tenant default")
    expect(page.get_by_text("Loading…")).to_have_count(0)
    page.screenshot(path=screenshots / "job-404.png", full_page=True)
    page.goto(console_runtime.url + "/#/workflows/01NOSUCHWORKFLOW")
    expect(page.get_by_role("heading", name="No such workflow")).to_be_visible()
    expect(page.get_by_text("Loading…")).to_have_count(0)
    page.get_by_role("link", name="All workflows").click()
    expect(page.get_by_role("heading", name="Workflows")).to_be_visible()


def test_cancel_and_cancel_workflow_ask_first_and_going_back_changes_nothing(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    tenant = fresh_tenant("confirm")
    as_tenant(page, tenant)
    job_id = console_runtime.submit({"task": "echo", "delay_seconds": 3600}, tenant)["job_id"]
    page.goto(console_runtime.url + f"/#/jobs/{job_id}")
    page.get_by_role("button", name="Cancel", exact=True).click()
    dialog = confirm_dialog(page)
    expect(dialog).to_contain_text(f"Cancel job {job_id}?")
    page.screenshot(path=screenshots / "confirm-cancel.png")
    dialog.get_by_role("button", name="Go back").click()
    expect(dialog).to_have_count(0)
    assert console_runtime.job(job_id, tenant)["state"] == "SCHEDULED"
    page.get_by_role("button", name="Cancel", exact=True).click()
    confirm_dialog(page).get_by_role("button", name="Cancel job").click()
    expect(page.locator("dl.facts")).to_contain_text("CANCELLED")
    assert console_runtime.job(job_id, tenant)["state"] == "CANCELLED"

    workflow = created(console_runtime.call("POST", "/workflows", {"name": "held", "steps": [
        {"id": "a", "task": "sleep", "payload": {"seconds": 60}},
        {"id": "b", "task": "echo", "depends_on": ["a"]}]}, tenant=tenant))
    page.goto(console_runtime.url + f"/#/workflows/{workflow['workflow_id']}")
    page.get_by_role("button", name="Cancel workflow").click()
    dialog = confirm_dialog(page)
    expect(dialog).to_contain_text("Its 2 unfinished step(s) are cancelled")
    dialog.get_by_role("button", name="Go back").click()
    got = console_runtime.call("GET", f"/workflows/{workflow['workflow_id']}", tenant=tenant)
    assert got.body["state"] == "RUNNING"
    page.get_by_role("button", name="Cancel workflow").click()
    confirm_dialog(page).get_by_role("button", name="Cancel workflow").click()
    expect(page.get_by_role("status")).to_have_text(
        f"Cancelled workflow {workflow['workflow_id']}.")


def cards(page: Page) -> dict[str, str]:
    found: dict[str, str] = {}
    for card in page.locator(".card").all():
        found[card.locator(".label").inner_text()] = card.locator(".value").inner_text()
    return found


def test_the_overviews_live_card_is_the_sum_of_live_jobs_by_state_and_says_what_it_counts(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    tenant = fresh_tenant("overview")
    as_tenant(page, tenant)
    # Two admitted jobs waiting an hour, and a workflow's two steps (not admitted, so
    # stats.live leaves them out): the page used to say 2 live jobs above a table of 4.
    for _ in range(2):
        console_runtime.submit({"task": "echo", "delay_seconds": 3600}, tenant)
    workflow = created(console_runtime.call("POST", "/workflows", {"steps": [
        {"id": "a", "task": "sleep", "payload": {"seconds": 30}},
        {"id": "b", "task": "echo", "depends_on": ["a"]}]}, tenant=tenant))
    try:
        page.goto(console_runtime.url + "/#/")
        live = page.get_by_role("region", name="Live jobs by state")
        expect(live.get_by_role("row").filter(has_text="SCHEDULED").get_by_role("link")
               ).to_have_text("2")
        expect(live.get_by_role("row").filter(has_text="RUNNING").get_by_role("link")
               ).to_have_text("1")
        counted = sum(int(n) for n in live.locator("tbody td a").all_inner_texts())
        assert counted == 4
        shown = cards(page)
        assert shown["live jobs"] == str(counted), shown
        assert shown["admitted, counted against your limit"] == "2", shown
        live_card = page.locator(".card").filter(has_text="live jobs").first
        expect(live_card.locator(".says")).to_contain_text("the sum of the table below")
        page.screenshot(path=screenshots / "overview-counts.png", full_page=True)
    finally:
        console_runtime.call("DELETE", f"/workflows/{workflow['workflow_id']}", tenant=tenant)


def test_at_390_px_the_navigation_fits_and_tables_scroll_inside_their_box(
        browser: Browser, console_runtime: Runtime, screenshots: Path) -> None:
    tenant = fresh_tenant("narrow")
    console_runtime.submit({"task": "echo", "payload": "x" * 10, "labels": {"env": "prod"}}, tenant)
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        page = context.new_page()
        as_tenant(page, tenant)
        for route in ("#/", "#/jobs", "#/schedules"):
            page.goto(console_runtime.url + "/" + route)
            expect(page.locator("main h1")).to_be_visible()
            expect(page.get_by_text("Loading…")).to_have_count(0)
            if route == "#/jobs":
                # The jobs table is wider than the phone: its own box scrolls, not the page.
                expect(page.locator("main tbody tr")).to_have_count(1)
                scroller = page.locator("main .scroll").first
                assert scroller.evaluate("el => el.scrollWidth > el.clientWidth")
                assert scroller.evaluate("el => getComputedStyle(el).overflowX") == "auto"
            # Nothing runs off the page sideways.
            assert page.evaluate("document.documentElement.scrollWidth") <= 390, route
            for link in page.locator("nav a").all():
                box = link.bounding_box()
                assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, (
                    route, link.inner_text(), box)
            page.screenshot(path=screenshots / f"narrow-{route.strip('#/') or 'overview'}.png",
                            full_page=True)
    finally:
        context.close()


def test_a_schedule_is_created_edited_paused_with_a_confirmation_and_deleted(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    tenant = fresh_tenant("schedules")
    as_tenant(page, tenant)
    page.goto(console_runtime.url + "/#/schedules")
    form = page.get_by_role("form", name="new schedule")
    form.get_by_label("Name").fill("console made")
    form.get_by_label("Cron").fill("0 9 * * *")
    form.get_by_label("Time zone").fill("Asia/Tokyo")
    form.get_by_label("Task").fill("echo")
    form.get_by_label("Payload (JSON)").fill('{"made": "in the console"}')
    form.get_by_role("button", name="Create schedule").click()
    expect(page.get_by_role("status")).to_contain_text("Created schedule console made")
    row = page.get_by_role("row").filter(has_text="console made")
    expect(row).to_contain_text("09:00:00 Asia/Tokyo")
    [stored] = console_runtime.call("GET", "/schedules", tenant=tenant).body["schedules"]
    assert stored["payload"] == {"made": "in the console"}

    row.get_by_role("button", name="Edit").click()
    editor = page.get_by_role("form", name="edit console made")
    expect(editor.get_by_label("Payload (JSON)")).to_have_value('{"made":"in the console"}')
    editor.get_by_label("Cron").fill("30 18 * * *")
    editor.get_by_role("button", name="Save changes").click()
    expect(page.get_by_role("status")).to_contain_text("Saved schedule console made")
    expect(row).to_contain_text("18:30:00 Asia/Tokyo")
    changed = console_runtime.call("GET", f"/schedules/{stored['schedule_id']}", tenant=tenant)
    assert changed.body["cron"] == "30 18 * * *" and changed.body["version"] > stored["version"]

    row.get_by_role("button", name="Pause").click()
    confirm_dialog(page).get_by_role("button", name="Go back").click()
    expect(row.locator(".badge")).to_have_text("ACTIVE")
    row.get_by_role("button", name="Pause").click()
    confirm_dialog(page).get_by_role("button", name="Pause schedule").click()
    expect(row.locator(".badge")).to_have_text("PAUSED")
    page.screenshot(path=screenshots / "schedule-edited.png", full_page=True)

    row.get_by_role("button", name="Delete").click()
    dialog = confirm_dialog(page)
    expect(dialog).to_contain_text("Delete schedule console made?")
    dialog.get_by_role("button", name="Delete schedule").click()
    expect(page.get_by_text(re.compile("^No schedules"))).to_be_visible()
    gone = console_runtime.call("GET", f"/schedules/{stored['schedule_id']}", tenant=tenant)
    assert gone.status == 404


def test_the_triggers_page_creates_lists_and_deletes_a_trigger(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    tenant = fresh_tenant("triggers")
    as_tenant(page, tenant)
    page.goto(console_runtime.url + "/#/triggers")
    expect(page.get_by_text(re.compile("^No triggers"))).to_be_visible()
    form = page.get_by_role("form", name="new trigger")
    form.get_by_label("Name").fill("orders placed")
    form.get_by_label("Task").fill("echo")
    form.get_by_label("Event pattern (JSON)").fill('{"source": ["shop"]}')
    form.get_by_role("button", name="Create trigger").click()
    expect(page.get_by_role("status")).to_contain_text("Created trigger orders placed")
    row = page.get_by_role("row").filter(has_text="orders placed")
    expect(row).to_contain_text('"shop"')
    # The trigger the page made is the one events match.
    fired = console_runtime.call("POST", "/events", {"source": "shop", "detail-type": "order",
                                                     "detail": {"n": 1}}, tenant=tenant)
    assert fired.status == 200 and len(fired.body["job_ids"]) == 1, fired.body
    page.screenshot(path=screenshots / "triggers.png", full_page=True)
    row.get_by_role("button", name="Delete").click()
    confirm_dialog(page).get_by_role("button", name="Delete trigger").click()
    expect(page.get_by_text(re.compile("^No triggers"))).to_be_visible()
    assert console_runtime.call("GET", "/triggers", tenant=tenant).body["triggers"] == []


def test_the_workers_page_lists_each_pools_worker_and_the_job_it_runs(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    sleeper = console_runtime.submit({"task": "sleep", "payload": {"seconds": 30}})["job_id"]
    console_runtime.wait_for([sleeper], {"RUNNING"})
    try:
        page.goto(console_runtime.url + "/#/workers")
        expect(page.get_by_role("heading", name="Workers")).to_be_visible()
        rows = page.locator("main tbody tr")
        for pool in ("default", "spare"):
            expect(rows.filter(has=page.get_by_role("cell", name=pool, exact=True))
                   ).to_have_count(1)
        expect(page.get_by_role("link", name=sleeper[-8:])).to_be_visible()
        page.screenshot(path=screenshots / "workers.png", full_page=True)
        page.get_by_role("link", name=sleeper[-8:]).click()
        expect(page.get_by_role("heading", name=f"Job {sleeper}")).to_be_visible()
    finally:
        console_runtime.call("DELETE", f"/jobs/{sleeper}")


def test_jobs_are_submitted_from_the_form_found_by_label_and_id_and_show_due_in_and_duration(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    tenant = fresh_tenant("search")
    as_tenant(page, tenant)
    other = console_runtime.submit({"task": "echo", "labels": {"env": "dev"}}, tenant)["job_id"]
    page.goto(console_runtime.url + "/#/jobs")
    page.get_by_text("Submit a job").click()
    form = page.get_by_role("form", name="submit a job")
    form.get_by_label("Task").fill("echo")
    form.get_by_label("Payload (JSON)").fill('{"from": "the form"}')
    form.get_by_label("Delay (s)").fill("7200")
    form.get_by_label("Labels").fill("env:prod, team:ops")
    form.get_by_role("button", name="Submit").click()
    expect(page.get_by_role("status")).to_contain_text("Submitted")
    job_id = page.get_by_role("status").get_by_role("link").inner_text()
    job = console_runtime.job(job_id, tenant)
    assert job["payload"] == {"from": "the form"} and job["labels"] == {"env": "prod",
                                                                        "team": "ops"}
    assert job["state"] == "SCHEDULED"
    console_runtime.wait_for([other], {"SUCCEEDED"}, tenant=tenant)

    filters = page.get_by_role("form", name="job filters")
    filters.get_by_label("Label").fill("env:prod")
    filters.get_by_role("button", name="Filter").click()
    rows = page.locator("main tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(job_id)
    # Due in about two hours; not started, so no duration yet.
    expect(rows.first.get_by_role("cell").nth(6)).to_have_text(
        re.compile(r"^in 1 h 59 min|^in 2 h"))
    expect(rows.first.get_by_role("cell").nth(7)).to_have_text("—")
    page.screenshot(path=screenshots / "jobs-search.png", full_page=True)

    page.goto(console_runtime.url + f"/#/jobs?q={other[:-4]}")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(other)
    expect(rows.first.get_by_role("cell").nth(6)).to_have_text("—")
    expect(rows.first.get_by_role("cell").nth(7)).to_have_text(re.compile(r"^\d+(\.\d)? (ms|s)$"))
    console_runtime.call("DELETE", f"/jobs/{job_id}", tenant=tenant)


def test_the_tasks_page_shows_each_tasks_figures_and_a_queue_wait_chart_of_the_past_hour(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    tenant = fresh_tenant("figures")
    ok = [console_runtime.submit({"task": "echo", "payload": n}, tenant)["job_id"]
          for n in range(3)]
    dead = console_runtime.submit({"task": "fail", "max_attempts": 1}, tenant)["job_id"]
    console_runtime.wait_for([*ok, dead], tenant=tenant)
    # The jobs ended before the page opened: what it shows comes from stored figures.
    as_tenant(page, tenant)
    page.goto(console_runtime.url + "/#/tasks")
    hour = page.get_by_role("region", name="Last hour")
    echo = hour.get_by_role("row").filter(has=page.get_by_role("link", name="echo"))
    expect(echo.get_by_role("cell").nth(1)).to_have_text("3")
    expect(echo.get_by_role("cell").nth(2)).to_have_text("0")
    expect(echo.get_by_role("cell").nth(4)).to_have_text(re.compile(r"^≤ \d"))
    fail = hour.get_by_role("row").filter(has=page.get_by_role("link", name="fail"))
    expect(fail.get_by_role("cell").nth(2)).to_have_text("1")
    expect(fail.get_by_role("cell").nth(3)).to_have_text("100 %")
    day = page.get_by_role("region", name="Last day")
    expect(day.get_by_role("row").filter(has=page.get_by_role("link", name="echo"))
           .get_by_role("cell").nth(1)).to_have_text("3")
    chart = page.get_by_role("img", name="queue wait per minute, last hour")
    expect(chart.locator("g.minute")).not_to_have_count(0)
    page.screenshot(path=screenshots / "tasks.png", full_page=True)
    # The Overview draws the same chart from the same stored figures.
    page.get_by_role("link", name="Overview").click()
    expect(page.get_by_role("region", name="Queue wait").get_by_role(
        "img", name="queue wait per minute, last hour").locator("g.minute")).not_to_have_count(0)
