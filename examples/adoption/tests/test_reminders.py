"""The application's own tests: its durable task on the test clock (an hour in
milliseconds), and its typed task refused at submission."""

from __future__ import annotations

from typing import Any

import pytest
from greeter.reminders import remind
from greeter.tasks import greet

from leasehold.client import ApiError, Client


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


def test_a_typed_task_takes_its_model_and_refuses_a_wrong_shape_naming_the_field(
        leasehold: Any) -> None:
    assert greet.submit({"name": "Cy", "bytes": 2048}).result()["size"] == "2.0 kB"
    for submit in (lambda: greet.submit({"bytes": "lots"}),
                   lambda: Client().submit("greeter.greet", {"bytes": "lots"})):
        with pytest.raises(ApiError, match=r"payload\.bytes") as refused:
            submit()
        assert (refused.value.status, refused.value.field) == (422, "payload.bytes")
    assert len(Client().list(task="greeter.greet")["jobs"]) == 1  # the refused wrote nothing
