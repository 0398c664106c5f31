"""The application's own tests of its durable task, on the test clock: an hour in
milliseconds."""

from __future__ import annotations

from typing import Any

from greeter.reminders import remind

from leasehold.client import Client


def test_the_reminder_greets_again_an_hour_later(leasehold: Any, clock: Any) -> None:
    job = remind.submit({"name": "Ann"})
    assert job.status() == "SLEEPING"
    clock.advance(3599)
    assert job.status() == "SLEEPING"
    clock.advance(1)
    assert job.result() == {"first": "Hello, Ann!", "again": "Hello again, Ann!"}


def test_the_applications_own_client_reaches_the_test_scheduler(leasehold: Any) -> None:
    job = Client().submit("greeter.remind", {"name": "Bob", "after_seconds": 86400})
    assert job.result() == {"first": "Hello, Bob!", "again": "Hello again, Bob!"}  # skips a day
