"""A real headless Chromium (Debian's ``chromium``, driven by Playwright) over a real runtime.

Playwright's own browser download cannot work here, so the browser is the system's; without
one these tests fail (``make test`` installs it with apt), they never skip.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Playwright, expect, sync_playwright

from tests.e2e.conftest import Runtime, start_runtime

# Waits, not deadlines: on two busy cores a page may need a while to show what it will show.
expect.set_options(timeout=20_000)

#: Where a browser may be: $LEASEHOLD_CHROMIUM, else Debian's and other distributions' names.
CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str:
    explicit = os.environ.get("LEASEHOLD_CHROMIUM")
    if explicit:
        return explicit
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("no Chromium for the console's browser tests: install Debian's `chromium` "
                "(`make test` does it with apt when it can) or set LEASEHOLD_CHROMIUM",
                pytrace=False)


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    launched = playwright.chromium.launch(executable_path=chromium_path(), headless=True,
                                          args=["--no-sandbox"])
    yield launched
    launched.close()


@pytest.fixture(scope="package")
def console_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    """One runtime for the browser tests (each module's tests use their own tenants), with the
    workflow example tasks, writing only to tmp.

    Two pools of one worker each: the ``spare`` pool's dead-letter queues belong to one test.
    """
    events = tmp_path_factory.mktemp("console-runtime") / "events.jsonl"
    tasks = ("examples.tasks,examples.workflow_tasks,tests.browser.gate_tasks,"
             "tests.browser.typed_tasks,examples.durable_tasks")
    started = start_runtime("--tasks", tasks,
                            "--pools", "default,spare", "--workers", "1",
                            "--event-log", str(events),
                            # Its stop need not wait for the tests' 20 s sleep jobs: FAST's
                            # 10 s drain (and the grace after it) was a 17 s teardown, and
                            # no test reads what a drain finishes.
                            "--drain-seconds", "1")
    yield started
    code = started.stop()
    assert code == 0, "".join(started.output[-30:])


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    """The test's own folder for screenshots ($LEASEHOLD_SCREENSHOTS to keep them elsewhere)."""
    keep = os.environ.get("LEASEHOLD_SCREENSHOTS")
    folder = Path(keep) if keep else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_page(browser: Browser, expected: Callable[[ConsoleMessage], bool] = lambda _: False,
              timeout_ms: float | None = 20_000) -> Iterator[Page]:
    """A fresh page; the test fails if the browser logged an error (other than one the test
    asks for on purpose: ``expected``) or a script threw."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    if timeout_ms is not None:
        opened.set_default_timeout(timeout_ms)
    problems: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error" and not expected(message):
            problems.append(f"console error: {message.text} at {message.location}")

    opened.on("console", on_console)
    opened.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
    yield opened
    context.close()
    assert not problems, "\n".join(problems)


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page; the test fails if the browser logged an error or a script threw."""
    yield from open_page(browser)
