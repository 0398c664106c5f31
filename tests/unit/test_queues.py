from typing import Any

from leasehold.aws.queues import MAX_DELAY_SECONDS, Message, Queues
from leasehold.settings import Settings


def test_sqs_delays_are_rounded_down_so_messages_are_never_late() -> None:
    sent: list[dict[str, Any]] = []

    class FakeSqs:
        def send_message(self, **kwargs: Any) -> None:
            sent.append(kwargs)

    class FakeClients:
        sqs = FakeSqs()

    settings = Settings(queue_urls={"leasehold-default-normal": "url"})
    queues = Queues(FakeClients(), settings)  # type: ignore[arg-type]
    for delay in (0.4, 1.999, 2.0, 899.5, 5000):
        queues.send("default", "normal", Message("j", 1), delay)
    assert [m["DelaySeconds"] for m in sent] == [0, 1, 2, 899, MAX_DELAY_SECONDS]


def test_messages_round_trip_and_a_foreign_body_is_stale() -> None:
    import pytest

    from leasehold.errors import StaleMessage

    for message in (Message("j", 3), Message("j", 4, 1_767_225_600_000)):
        assert Message.parse(message.body()) == message
    for body in ("not json", "[]", '{"job_id": "j"}', '{"job_id": "j", "epoch": "x"}'):
        with pytest.raises(StaleMessage):
            Message.parse(body)
