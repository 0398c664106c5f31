"""The emulator's ``LEASEHOLD_SQS_DELAY_TICK``: delayed messages released on a tick (issue 19).

moto releases a delayed message within milliseconds of its due time; another SQS
implementation checks once a second. The option lets the benchmarks measure start lateness
on that clock too.
"""

from __future__ import annotations

import math
import time

import boto3
import pytest

from leasehold.local import emulator
from leasehold.local.sqs_time import DELAY_TICK_ENV


def test_a_delayed_message_is_released_at_the_next_whole_second_tick_not_before(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DELAY_TICK_ENV, "1")  # the emulator's process inherits it
    server = emulator.start()
    try:
        sqs = boto3.client("sqs", endpoint_url=server.endpoint, region_name="us-east-1")
        url = sqs.create_queue(QueueName="tick")["QueueUrl"]
        while not 0.1 <= time.time() % 1 <= 0.4:  # due time well inside a second
            time.sleep(0.02)
        sent = time.time()
        sqs.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=1)
        tick = math.ceil(sent + 1)  # due at sent + 1, released at the next whole second
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
        arrived = time.time()
        assert [m["Body"] for m in got] == ["x"]
        # Without the tick it came at sent + 1, 0.6 s or more before the tick.
        assert arrived >= tick - 0.05, (sent, tick, arrived)
    finally:
        server.stop()
