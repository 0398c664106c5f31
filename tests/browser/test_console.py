"""The web console in a real Chromium over a real ``leasehold dev``: what a person sees.

Each test submits real jobs through the API, opens a page and reads it as a person would
(text, tables, the workflow's SVG), clicks the buttons, and saves a screenshot for review.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import ROOT, Runtime

pytestmark = pytest.mark.browser


def wait_state(runtime: Runtime, job_id: str, states: set[str], tenant: str = "default",
               timeout: float = 30) -> dict[str, Any]:
    return runtime.wait_for([job_id], states, tenant=tenant, timeout=timeout)[job_id]


def test_overview_shows_totals_queues_workers_and_a_throughput_chart(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    sleeper = console_runtime.submit({"task": "sleep", "payload": {"seconds": 60}})["job_id"]
    wait_state(console_runtime, sleeper, {"RUNNING"})
    # The address leasehold dev prints for the console.
    [banner] = [line for line in console_runtime.output if line.strip().startswith("console:")]
    assert banner.split()[1] == console_runtime.url + "/"
    page.goto(banner.split()[1])
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    # Jobs that finish after the page's first sample of /stats show in its throughput chart.
    expect(page.get_by_text("Sampling /stats every 5 s…")).to_be_visible()
    ids = [console_runtime.submit({"task": "echo", "payload": i})["job_id"] for i in range(3)]
    console_runtime.wait_for(ids)
    expect(page.get_by_text(re.compile(r"^([3-9]|\d\d+) jobs finished in the last minute"))
           ).to_be_visible()
    expect(page.locator("svg.throughput rect.bar:not([height='0'])")).not_to_have_count(0)
    succeeded = page.locator(".card").filter(has_text="succeeded").locator(".value")
    expect(succeeded).to_have_text(re.compile(r"^([3-9]|\d\d+)$"))
    workers = page.get_by_role("region", name="Workers")
    # The runtime started one worker process per pool.
    for pool in ("default", "spare"):
        expect(workers.get_by_role("row").filter(has_text=pool)).to_have_count(1)
    expect(workers).to_contain_text(re.compile(r"\d+(\.\d)? s ago"))
    queues = page.get_by_role("region", name="Queues")
    for priority in ("high", "normal", "low"):
        expect(queues.get_by_role("row").filter(has_text=priority)).to_have_count(2)
    live = page.get_by_role("region", name="Live jobs by state")
    running = live.get_by_role("row").filter(has_text="RUNNING").get_by_role("link")
    expect(running).to_have_text(re.compile(r"^[1-9]\d*$"))
    page.screenshot(path=screenshots / "overview.png", full_page=True)
    assert console_runtime.call("DELETE", f"/jobs/{sleeper}").status == 200


def test_the_jobs_table_lists_a_job_and_its_page_shows_payload_result_and_history(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    # Markup in a payload is shown as text, never run or rendered.
    payload_in = {"greeting": "hello console", "html": "<img src=x onerror=alert(1)><b>bold?</b>"}
    job_id = console_runtime.submit({"task": "echo", "payload": payload_in})["job_id"]
    wait_state(console_runtime, job_id, {"SUCCEEDED"})
    page.goto(console_runtime.url + "/#/jobs?task=echo")
    page.get_by_role("link", name=job_id).click()
    expect(page.get_by_role("heading", name=f"Job {job_id}")).to_be_visible()
    payload = page.get_by_role("region", name="Payload")
    expect(payload).to_contain_text('"greeting": "hello console"')
    expect(payload).to_contain_text("<img src=x onerror=alert(1)><b>bold?</b>")
    expect(page.locator("main img, main b")).to_have_count(0)
    expect(page.get_by_role("region", name="Result")).to_contain_text("hello console")
    history = page.get_by_role("region", name="History")
    expect(history.get_by_role("listitem")).not_to_have_count(0)
    expect(history.get_by_role("listitem").last).to_contain_text("SUCCEEDED")
    # The code version that first ran it (leasehold dev: the tasks' source hash), and the
    # one each attempt ran on, at its lease (issue 36).
    expect(page.get_by_test_id("code-version")).to_have_text(re.compile(r"^dev-[0-9a-f]{12}$"))
    expect(history).to_contain_text(re.compile(r"lease on dev-[0-9a-f]{12}"))
    page.screenshot(path=screenshots / "job.png", full_page=True)


def test_the_jobs_table_pages_with_the_apis_cursor(page: Page, console_runtime: Runtime) -> None:
    tenant = "console-pager"
    ids = [console_runtime.submit({"task": "echo", "payload": i}, tenant)["job_id"]
           for i in range(7)]
    page.goto(console_runtime.url + "/#/jobs?limit=5")
    page.get_by_label("Tenant").fill(tenant)
    page.get_by_label("Tenant").press("Enter")
    rows = page.locator("main tbody tr")
    expect(rows).to_have_count(5)  # newest first, 5 a page
    expect(rows.first).to_contain_text(ids[-1])
    page.get_by_role("button", name="Older →").click()
    expect(page.get_by_text("page 2")).to_be_visible()
    expect(rows).to_have_count(2)
    expect(rows.last).to_contain_text(ids[0])
    expect(page.get_by_role("button", name="Older →")).to_have_count(0)
    page.get_by_role("button", name="← Newer").click()
    expect(rows.first).to_contain_text(ids[-1])


def test_a_dead_jobs_error_shows_and_retry_runs_it_again_and_cancel_stops_one(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    dead = console_runtime.submit({"task": "fail", "max_attempts": 1})["job_id"]
    wait_state(console_runtime, dead, {"DEAD"})
    page.goto(console_runtime.url + "/#/jobs?state=DEAD")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=dead))
    expect(row).to_contain_text("ExampleFailure: failing on purpose (attempt 1)")
    row.get_by_role("link", name=dead).click()
    expect(page.get_by_test_id("job-error")).to_have_text(
        "ExampleFailure: failing on purpose (attempt 1)")
    page.screenshot(path=screenshots / "dead-job.png", full_page=True)
    page.get_by_role("button", name="Retry").click()
    expect(page.get_by_role("status")).to_have_text(f"Queued {dead} again.")
    # The page follows the job through its second run until it dies again.
    history = page.get_by_role("region", name="History").get_by_role("listitem")
    expect(history.filter(has_text="manual retry")).to_have_count(1)
    expect(history.filter(has_text="RUNNING → DEAD")).to_have_count(2, timeout=30_000)

    sleeper = console_runtime.submit({"task": "sleep", "payload": {"seconds": 60}})["job_id"]
    wait_state(console_runtime, sleeper, {"RUNNING"})
    page.goto(console_runtime.url + f"/#/jobs/{sleeper}")
    page.get_by_role("button", name="Cancel", exact=True).click()
    page.locator("dialog.confirm").get_by_role("button", name="Cancel job").click()
    expect(page.locator("dl.facts")).to_contain_text("CANCELLED", timeout=30_000)
    assert console_runtime.job(sleeper)["state"] == "CANCELLED"


def test_the_workflow_graph_shows_each_step_and_a_step_opens_its_job(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    reply = console_runtime.call("POST", "/workflows", {"name": "diamond", "steps": [
        {"id": "a", "task": "add-inputs", "payload": 1},
        {"id": "b", "task": "add-inputs", "payload": 10, "depends_on": ["a"]},
        {"id": "c", "task": "add-inputs", "payload": 100, "depends_on": ["a"]},
        {"id": "d", "task": "add-inputs", "depends_on": ["b", "c"]}]})
    assert reply.status == 201, reply.body
    workflow_id = reply.body["workflow_id"]
    page.goto(console_runtime.url + "/#/workflows")
    page.get_by_role("link", name=workflow_id).click()
    graph = page.get_by_role("group", name="workflow graph")
    for step in "abcd":
        expect(graph.get_by_role("link", name=f"step {step}: SUCCEEDED")).to_be_visible(
            timeout=30_000)
    # Four boxes and the four dependency edges between them.
    expect(graph.locator("path.edge")).to_have_count(4)
    page.screenshot(path=screenshots / "workflow.png", full_page=True)
    jobs = {s["id"]: s["job_id"] for s in reply.body["steps"]}
    graph.get_by_role("link", name="step d: SUCCEEDED").click()
    expect(page.get_by_role("heading", name=f"Job {jobs['d']}")).to_be_visible()
    expect(page.get_by_role("region", name="Result")).to_contain_text("112")
    # The jobs page filtered by the workflow lists its four step jobs.
    page.goto(console_runtime.url + f"/#/jobs?workflow={workflow_id}")
    for step, job_id in jobs.items():
        row = page.get_by_role("row").filter(has=page.get_by_role("link", name=job_id))
        expect(row.get_by_role("cell").nth(3)).to_have_text(step)


def test_a_tenants_dead_letters_are_listed_and_a_redrive_empties_the_queue(
        page: Page, console_runtime: Runtime, screenshots: Path, tmp_path: Path) -> None:
    tenant = "console-dlq"
    gate = tmp_path / "gate"
    # Dies while its gate is closed; the spare pool's dead-letter queues hold only this job.
    job_id = console_runtime.submit({"task": "gate", "payload": {"path": str(gate)},
                                     "max_attempts": 1, "pool": "spare"}, tenant)["job_id"]
    wait_state(console_runtime, job_id, {"DEAD"}, tenant)
    page.goto(console_runtime.url + "/#/dead-letters")
    expect(page.get_by_role("heading", name="Dead letters")).to_be_visible()
    # The default tenant's page does not show another tenant's job; picking the tenant does.
    expect(page.get_by_text("Loading…")).to_have_count(0)
    expect(page.get_by_role("link", name=job_id)).to_have_count(0)
    page.get_by_label("Tenant").fill(tenant)
    page.get_by_label("Tenant").press("Enter")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=job_id))
    expect(row).to_contain_text("GateClosed: the gate gate is closed")
    depths = page.get_by_role("region", name="Dead-letter queues")
    spare = depths.get_by_role("row").filter(has_text=re.compile(r"^\s*spare\s*normal"))
    expect(spare.get_by_role("cell").last).to_have_text("1")
    page.screenshot(path=screenshots / "dead-letters.png", full_page=True)
    gate.touch()
    page.get_by_role("button", name="Redrive").click()
    dialog = page.locator("dialog.confirm")
    expect(dialog).to_contain_text("Redrive the dead jobs of every pool?")
    expect(dialog).to_contain_text("(1 listed below)")
    dialog.get_by_role("button", name="Redrive").click()
    expect(page.get_by_role("status")).to_contain_text("Redriven 1 job(s)")
    expect(page.get_by_text("No dead letters.")).to_be_visible()
    expect(spare.get_by_role("cell").last).to_have_text("0")
    assert wait_state(console_runtime, job_id, {"SUCCEEDED"}, tenant)["result"] == {
        "opened": "gate"}


def test_schedules_show_fire_times_in_their_zone_and_utc_and_pause_resume_trigger(
        page: Page, console_runtime: Runtime, screenshots: Path) -> None:
    reply = console_runtime.call("POST", "/schedules", {
        "name": "nightly console report", "cron": "30 2 * * *", "timezone": "Asia/Tokyo",
        "task": "echo", "payload": {"report": True}})
    assert reply.status == 201, reply.body
    schedule = reply.body
    page.goto(console_runtime.url + "/#/schedules")
    row = page.get_by_role("row").filter(has_text="nightly console report")
    expect(row).to_contain_text("30 2 * * *")
    # 02:30 in Tokyo is 17:30 UTC the day before.
    expect(row).to_contain_text(re.compile(r"02:30:00 Asia/Tokyo"))
    expect(row).to_contain_text(re.compile(r"17:30:00 UTC"))
    row.get_by_role("button", name="Next times").click()
    times = page.get_by_role("region", name="next fire times")
    expect(times.get_by_role("row")).to_have_count(6)  # a header and five times
    row.get_by_role("button", name="Pause").click()
    page.locator("dialog.confirm").get_by_role("button", name="Pause schedule").click()
    expect(row.locator(".badge")).to_have_text("PAUSED")
    row.get_by_role("button", name="Resume").click()
    expect(row.locator(".badge")).to_have_text("ACTIVE")
    row.get_by_role("button", name="Trigger").click()
    expect(page.get_by_role("status")).to_contain_text("Triggered nightly console report")
    page.screenshot(path=screenshots / "schedules.png", full_page=True)
    triggered = page.get_by_role("status").get_by_role("link").inner_text()
    # The schedule's runs: the jobs page filtered by the schedule lists the triggered job.
    row.get_by_role("link", name="runs").click()
    expect(page.get_by_label("Schedule", exact=True)).to_have_value(schedule["schedule_id"])
    page.get_by_role("link", name=triggered).click()
    expect(page.locator("dl.facts")).to_contain_text(schedule["schedule_id"])


@pytest.fixture
def console_proxy(console_runtime: Runtime) -> Iterator[str]:
    """``leasehold console --url <runtime>`` as a person runs it; yields its address."""
    process = subprocess.Popen(
        [sys.executable, "-m", "leasehold.cli", "console", "--url", console_runtime.url,
         "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    first = process.stdout.readline()
    try:
        assert first.startswith("Console: "), first + process.stdout.read()
        yield first.split()[1].rstrip("/")
    finally:
        process.terminate()
        process.wait(10)


def test_leasehold_console_serves_the_page_and_forwards_its_calls_to_the_api(
        page: Page, console_runtime: Runtime, console_proxy: str, screenshots: Path) -> None:
    tenant = "proxied"
    job_id = console_runtime.submit({"task": "fail", "max_attempts": 1}, tenant)["job_id"]
    wait_state(console_runtime, job_id, {"DEAD"}, tenant)
    page.goto(console_proxy + "/#/jobs")
    page.get_by_label("Tenant").fill(tenant)
    page.get_by_label("Tenant").press("Enter")
    page.get_by_role("link", name=job_id).click()
    expect(page.get_by_test_id("job-error")).to_contain_text("failing on purpose")
    # A POST through the proxy reaches the runtime: the job runs again.
    page.get_by_role("button", name="Retry").click()
    expect(page.get_by_role("status")).to_have_text(f"Queued {job_id} again.")
    page.screenshot(path=screenshots / "proxy.png", full_page=True)
    history = console_runtime.job(job_id, tenant)["history"]
    assert any(entry["reason"] == "manual retry" for entry in history)
    # A call the page did not make (no marker header: another site's script) is refused.
    request = urllib.request.Request(console_proxy + f"/jobs/{job_id}",
                                     headers={"X-Leasehold-Tenant": tenant})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 403
    # Leave the job page before the proxy stops (its fixture is torn down before the page's):
    # its refresh would meet a closed port, which Chromium logs as an error (a flake seen in
    # full runs as ERR_CONNECTION_REFUSED/RESET on /jobs/{id}/steps).
    page.goto("about:blank")


class _EvilPage(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>another site</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def other_site() -> Iterator[str]:
    """A page of another site on this machine (another dev server, a local HTML file's
    server): Chromium's Local Network Access blocks a public site's requests to 127.0.0.1,
    not these, and other browsers block neither."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EvilPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://localhost:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_a_page_of_another_site_cannot_submit_through_the_browser(
        browser: Browser, console_runtime: Runtime, other_site: str) -> None:
    """A cross-site ``text/plain`` POST needs no preflight: the runtime itself refuses it."""
    key = "cross-site-" + uuid.uuid4().hex
    context = browser.new_context()
    try:
        evil = context.new_page()
        evil.goto(other_site)
        sent = evil.evaluate("""async ([url, key]) => {
            const response = await fetch(url, {method: "POST", mode: "no-cors",
              headers: {"Content-Type": "text/plain"},
              body: JSON.stringify({task: "echo", payload: "evil", idempotency_key: key})});
            return response.type;
        }""", [console_runtime.url + "/jobs", key])
        assert sent == "opaque"  # the browser sent it, and shows the page nothing
    finally:
        context.close()
    # Had the page's job landed, this key would name it (the API would answer 409 or it).
    reply = console_runtime.call("POST", "/jobs", {"task": "echo", "payload": "mine",
                                                   "idempotency_key": key})
    assert reply.status == 201 and reply.body["payload"] == "mine", reply.body
