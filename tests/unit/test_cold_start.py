"""What a handler's import (its cold start) may not bring: what its first request builds.

The API handler builds the resolver (Powertools' event handler, pydantic, every route's
models) and the AWS clients on its first request or before a SnapStart snapshot
(``leasehold.handlers.api.prime``), never at import. Each import runs in a fresh interpreter,
so what other tests imported does not count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Modules each handler's import must not load.
DEFERRED = {
    "leasehold.handlers.api": ("pydantic", "aws_lambda_powertools.event_handler", "boto3",
                               "leasehold.api", "leasehold.compose"),
    # Application code's client: HTTP with the standard library; botocore only to sign.
    "leasehold.client": ("boto3", "botocore", "moto", "pydantic", "aws_lambda_powertools",
                         "leasehold.aws", "leasehold.lifecycle", "leasehold.api"),
    # Task modules import this: the worker's cold start must not pay for moto or the client.
    "leasehold": ("moto", "leasehold.client", "leasehold.testing", "boto3"),
    # Every `leasehold` command: only `dev` and `worker` (and commands that call AWS) pay
    # for an AWS SDK, when they run.
    "leasehold.cli": ("boto3", "botocore", "moto"),
}


def _imported(module: str, then: str = "") -> set[str]:
    code = (f"import json, sys, {module}\n{then}\n"
            "print(json.dumps(sorted(sys.modules)))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "functions"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, env=env, cwd=ROOT).stdout
    return set(json.loads(out.splitlines()[-1]))


@pytest.mark.parametrize("handler", sorted(DEFERRED))
def test_a_handler_import_leaves_the_heavy_parts_for_its_first_request(handler: str) -> None:
    loaded = _imported(handler)
    assert [m for m in DEFERRED[handler] if m in loaded] == []


def test_priming_the_api_handler_builds_what_the_import_left_out() -> None:
    """The deferral is real: ``prime`` (a SnapStart hook, or the first request) loads them."""
    loaded = _imported("leasehold.handlers.api", "leasehold.handlers.api.prime()")
    assert [m for m in DEFERRED["leasehold.handlers.api"] if m not in loaded] == []


def test_a_restored_snapshot_draws_fresh_random_numbers() -> None:
    """Every environment restored from one SnapStart snapshot starts with the same memory:
    the after-restore hook re-seeds the app's random numbers (retry jitter)."""
    from leasehold.handlers import api

    api._app.cache_clear()
    try:
        api.prime()
        app = api._app()[0]
        assert app.clients._clients == {}  # no client, hence no credentials, in a snapshot
        frozen = app.rng.getstate()
        api.after_restore()
        assert app.rng.getstate() != frozen
    finally:
        api._app.cache_clear()
