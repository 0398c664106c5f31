"""Tasks for tests/e2e/test_client_flow_options.py: flow control declared on the task, as a
user's own module declares it (the client never sees these options)."""

from __future__ import annotations

from typing import Any

from leasehold import task


@task("rebuild-doc", debounce={"key": "doc:{payload.doc}", "seconds": 2})
def rebuild_doc(payload: Any, ctx: Any) -> Any:
    return payload


@task("import-file", unique={"key": "import:{payload.file}"})
def import_file(payload: Any, ctx: Any) -> Any:
    ctx.wait_cancelled(float(payload.get("seconds", 0)))
    return payload
