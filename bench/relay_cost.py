"""What publishing job events from the change stream costs per job, against publishing them
inline (issue 24).

``jobs`` no-op jobs run in this process against the embedded emulator's server (moto serves
``dynamodbstreams`` only there): submitted, leased and finished as a worker does. Then the
jobs table's stream is read whole: its records per job, and the relay's time over them in
batches of the deployed event source mapping's size (``cdk/relay.py``: 100 records), with a
sink that writes events to a local file. Inline, the same events cost the workers their
``PutEvents`` calls (in batches of 10); from the stream they cost the relay function's
invocations and time. Stream reads by a Lambda event source mapping are not billed.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.cost import PRICES
from leasehold.aws.clients import Clients
from leasehold.aws.provision import create_all
from leasehold.compose import compose
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.events.publishing import FileSink, wanted
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Worker
from leasehold.local import emulator
from leasehold.settings import Settings
from leasehold.streams.relay import changes, relay

#: The relay function's memory and its event source mapping's batch size (cdk/relay.py;
#: tests/infra/test_relay.py holds them equal without this module importing the CDK).
RELAY_MEMORY_GB = 0.5
BATCH_SIZE = 100


def measure(jobs: int = 200) -> dict[str, Any]:
    server = emulator.start()
    previous = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    try:
        settings = Settings(endpoint_url=server.endpoint, jobs_table="relay-jobs",
                            schedules_table="relay-sch", tenants_table="relay-ten",
                            coordination_table="relay-co", workflows_table="relay-wf",
                            queue_prefix="relay", events_from="stream")
        clients = Clients(settings)
        create_all(clients, settings)
        registry = TaskRegistry()
        registry.task("bench.noop")(lambda payload, ctx: None)
        app = compose(settings, registry=registry, clients=clients)
        for _ in range(jobs):
            submit(app, JobSpec(task="bench.noop"))
        url = app.queues.url("default", "normal")
        while batch := app.queues.receive(url, max_messages=10):
            consume(Worker(app), batch)
        streams = clients.client("dynamodbstreams")
        arn = clients.dynamodb.describe_table(TableName=settings.jobs_table)["Table"][
            "LatestStreamArn"]
        records: list[Any] = []
        for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            iterator = streams.get_shard_iterator(
                StreamArn=arn, ShardId=shard["ShardId"],
                ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            while iterator:
                got = streams.get_records(ShardIterator=iterator, Limit=1000)
                if not got["Records"]:
                    break
                records += got["Records"]
                iterator = got.get("NextShardIterator")
        with tempfile.TemporaryDirectory() as directory:
            sink = FileSink(Path(directory) / "events.jsonl")
            started = time.perf_counter()
            batches = 0
            for start in range(0, len(records), BATCH_SIZE):
                relay(records[start:start + BATCH_SIZE], sink, app.settings.publish, app.now)
                batches += 1
            seconds = time.perf_counter() - started
        events = sum(1 for job, source in changes(records)
                     if wanted(app.settings.publish, job, source))
    finally:
        server.stop()
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
    per_job_records = len(records) / jobs
    per_batch_ms = seconds / batches * 1000
    invocations = batches / jobs
    gb_seconds = RELAY_MEMORY_GB * seconds / jobs
    stream_dollars = (invocations * PRICES["lambda_per_million_requests"]
                      + gb_seconds * 1e6 * PRICES["lambda_arm64_per_gb_second"])
    return {
        "jobs": jobs, "publish": app.settings.publish, "batch_size": BATCH_SIZE,
        "stream_records_per_job": round(per_job_records, 2),
        "events_per_job": round(events / jobs, 2),
        "relay_ms_per_batch": round(per_batch_ms, 2),
        "relay_invocations_per_job": round(invocations, 4),
        "relay_gb_seconds_per_job": round(gb_seconds, 7),
        # Inline: one PutEvents request per 10 events, inside the workers' invocations.
        "inline_put_events_per_job": round(events / jobs / 10, 3),
        "stream_dollars_per_million_jobs": round(stream_dollars, 2),
        "eventbridge_dollars_per_million_jobs": round(
            events / jobs * PRICES["eventbridge_per_million_custom_events"], 2),
    }


def markdown(r: dict[str, Any]) -> list[str]:
    return [
        "", "### Job events from the change stream vs inline (issue 24)", "",
        f"{r['jobs']} no-op jobs (`publish={r['publish']}`): "
        f"**{r['stream_records_per_job']:g} stream records per job** (every committed "
        f"change of its row), {r['events_per_job']:g} events per job. The relay over them "
        f"in batches of {r['batch_size']} (the event source mapping's): "
        f"{r['relay_ms_per_batch']:g} ms per batch here, so "
        f"{r['relay_invocations_per_job']:g} invocations and "
        f"{r['relay_gb_seconds_per_job']:g} GB-s per job at {RELAY_MEMORY_GB:g} GB: "
        f"**${r['stream_dollars_per_million_jobs']:g} per million jobs** for the relay "
        "function (its stream reads are free). Inline the same events took "
        f"{r['inline_put_events_per_job']:g} PutEvents requests per job inside the workers' "
        "invocations (no request charge of their own; their time is in the worker's "
        "figure). On AWS each of those calls' wait moves from the workers to the relay "
        "(the same number of calls, not measurable here). EventBridge bills the events "
        "either way: "
        f"${r['eventbridge_dollars_per_million_jobs']:g} per million jobs.",
    ]
