"""What unique keys, start windows and debounce cost per job (issue 22), against a job that
uses none: AWS requests and DynamoDB write units, metered on a private emulator as
:mod:`bench.per_job` meters the other kinds.

Run: ``python -m bench.flow_keys`` (prints JSON; not part of ``make bench``'s report yet).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from bench.local import fake_credentials, library_app
from bench.per_job import BATCH, Bench
from leasehold.aws import provision
from leasehold.core.spec import JobSpec
from leasehold.lifecycle.submission import submit
from leasehold.local import emulator


def measure_all(batch: int = BATCH) -> dict[str, Any]:
    fake_credentials()
    server = emulator.start()
    try:
        app = library_app(server.endpoint)
        provision.create_all(app.clients, app.settings)
        bench = Bench(app)
        results: dict[str, Any] = {}

        def kind(name: str, spec: Callable[[str, int], JobSpec], messages: int = batch,
                 per: int = batch) -> None:
            def body() -> None:
                tenant = "f" + uuid.uuid4().hex[:10]
                for n in range(batch):
                    submit(app, spec(tenant, n))
                bench.run(messages)

            body()  # warm
            results[name] = bench.measure(body).per(per)

        kind("plain", lambda t, n: JobSpec(task="bench.noop", tenant=t))
        kind("unique", lambda t, n: JobSpec(task="bench.noop", tenant=t,
                                           unique={"key": f"k{n}"}))
        kind("start_within", lambda t, n: JobSpec(task="bench.noop", tenant=t,
                                                 start_within_seconds=60))
        # A window of one submission: the job's own cost.
        kind("debounce_one_submission", lambda t, n: JobSpec(
            task="bench.noop", tenant=t, debounce={"key": f"k{n}", "seconds": 1}))
        # Ten submissions coalesced into one run, per submission: each pushes the window
        # out (a new epoch and a hand-off; the old message arrives and is refused).
        kind("debounce_per_coalesced_submission", lambda t, n: JobSpec(
            task="bench.noop", tenant=t, payload=n, debounce={"key": "one", "seconds": 1}))
        return results
    finally:
        server.stop()


if __name__ == "__main__":
    print(json.dumps(measure_all(), indent=1, sort_keys=True))
