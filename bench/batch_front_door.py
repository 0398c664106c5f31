"""The front door's share of a job submitted through ``POST /jobs/batch`` (issue 32): AWS
requests per job the API makes to submit, and API Gateway + API Lambda dollars per million jobs
at REST and HTTP API prices, against one job per ``POST /jobs``.

In process, over moto, one client (moto's in-process backend is not safe across threads; the
requests a submission makes do not depend on how many clients send them). The requests
counted are the API's own calls; the worker's side of a job (receive, lease, finish, delete)
does not change with how it was submitted (bench.front_door measures it). The API Lambda's
seconds are moto's, far slower per write than DynamoDB: an upper bound.
``python -m bench.batch_front_door``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.cost import API_MEMORY_GB, PRICES, _lambda

#: API Gateway list prices per million requests (us-east-1).
API_PRICES = {"rest": PRICES["api_gateway_rest_per_million"], "http": 1.00}


def measure(jobs: int = 400, clients: int = 1, batch: int = 100) -> dict[str, Any]:
    import boto3
    from moto import mock_aws

    from leasehold.api.app import handle
    from leasehold.api.context import ApiConfig
    from leasehold.aws.clients import Clients
    from leasehold.aws.provision import create_all
    from leasehold.compose import compose
    from leasehold.core.registry import TaskRegistry
    from leasehold.local.gateway import proxy_event
    from leasehold.settings import Settings

    out: dict[str, Any] = {"jobs": jobs, "clients": clients, "batch": batch}
    with mock_aws():
        boto3.setup_default_session(region_name="us-east-1")
        registry = TaskRegistry()
        registry.task("echo")(lambda payload, ctx: payload)
        for mode, size in (("single", 1), ("batch", batch)):
            settings = Settings(queue_prefix=f"b{mode}", jobs_table=f"b{mode}-jobs",
                                schedules_table=f"b{mode}-schedules",
                                tenants_table=f"b{mode}-tenants",
                                coordination_table=f"b{mode}-coord",
                                workflows_table=f"b{mode}-workflows", pools=("default",))
            aws = Clients(settings)
            create_all(aws, settings)
            app = compose(settings, registry=registry, clients=aws)
            calls: Counter[str] = Counter()
            for client in (app.clients.dynamodb, app.clients.sqs):
                client.meta.events.register(
                    "before-call", lambda model, counted=calls, **_: counted.update([model.name]))
            config = ApiConfig(trust_tenant_header=True)
            requests = [list(range(i, min(i + size, jobs))) for i in range(0, jobs, size)]

            def send(items: list[int], app: Any = app, size: int = size,
                     config: Any = config) -> int:
                if size == 1:
                    event = proxy_event("POST", "/jobs", {"X-Leasehold-Tenant": "b"},
                                        json.dumps({"task": "echo", "payload": items[0]}))
                    return 1 if handle(app, event, None, config)["statusCode"] == 201 else 0
                body = {"jobs": [{"task": "echo", "payload": i} for i in items]}
                event = proxy_event("POST", "/jobs/batch", {"X-Leasehold-Tenant": "b"},
                                    json.dumps(body))
                answer = json.loads(handle(app, event, None, config)["body"])
                return int(answer["created"])

            start = time.perf_counter()
            with ThreadPoolExecutor(clients) as pool:
                created = sum(pool.map(send, requests))
            seconds = time.perf_counter() - start
            per_request_s = seconds * clients / len(requests)
            out[mode] = {
                "created": created, "api_requests": len(requests),
                "aws_requests_per_job": round(sum(calls.values()) / jobs, 3),
                "by_operation": {op: round(n / jobs, 3) for op, n in calls.most_common()},
                "api_seconds_per_request": round(per_request_s, 4),
                "front_door_dollars_per_million_jobs": {
                    api: round((price + _lambda(1, per_request_s * API_MEMORY_GB)) / size, 3)
                    for api, price in API_PRICES.items()},
            }
    return out


if __name__ == "__main__":
    print(json.dumps(measure(), indent=2))
