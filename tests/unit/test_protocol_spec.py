"""The OpenAPI text of the ``workers`` tag links to docs/protocol.md and agrees with it: every
link names a section the spec has, every worker route links to it, and the limits the
schemas enforce are the ones the spec states."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from leasehold.api.app import openapi_json
from leasehold.api.workers import PROTOCOL, SPEC

ROOT = Path(__file__).parents[2]
TEXT = (ROOT / SPEC).read_text()
DOCUMENT: dict[str, Any] = json.loads(openapi_json())


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


ANCHORS = {anchor(line.lstrip("#")) for line in TEXT.splitlines() if line.startswith("## ")}


def workers_texts() -> list[tuple[str, str]]:
    """(where, text) of every description the workers tag shows: the tag, its operations,
    and the schemas they take and answer."""
    [tag] = [t for t in DOCUMENT["tags"] if t["name"] == "workers"]
    found = [("tag", tag["description"])]
    schemas = DOCUMENT["components"]["schemas"]
    for name in ("LeaseRequest", "LeaseAnswer", "LeasedJob", "LeaseOut", "HeartbeatRequest",
                 "HeartbeatAnswer", "CompleteRequest", "FailRequest", "ErrorIn"):
        for field, spec in schemas[name].get("properties", {}).items():
            if "description" in spec:
                found.append((f"{name}.{field}", spec["description"]))
    for path, operations in DOCUMENT["paths"].items():
        for method, operation in operations.items():
            if "workers" in operation.get("tags", ()):
                found.append((f"{method.upper()} {path}", operation.get("description", "")))
    return found


def test_every_link_names_a_section_the_spec_has() -> None:
    links = [(where, link) for where, text in workers_texts()
             for link in re.findall(re.escape(SPEC) + r"#([\w-]+)", text)]
    assert len(links) >= 10
    assert [(where, link) for where, link in links if link not in ANCHORS] == []


def test_the_tag_and_every_worker_route_link_to_the_spec() -> None:
    texts = workers_texts()
    operations = [(where, text) for where, text in texts if where.startswith("POST ")]
    assert {where for where, _ in operations} == {
        "POST /workers/lease", "POST /jobs/{job_id}/heartbeat", "POST /jobs/{job_id}/complete",
        "POST /jobs/{job_id}/fail"}
    assert [where for where, text in [texts[0], *operations] if f"{SPEC}#" not in text] == []
    assert f"protocol version {PROTOCOL}" in texts[0][1]
    assert f"This is protocol version **{PROTOCOL}**" in TEXT


def test_the_limits_the_schemas_enforce_are_the_ones_the_spec_states() -> None:
    schemas = DOCUMENT["components"]["schemas"]
    lease = schemas["LeaseRequest"]["properties"]
    max_jobs = lease["max_jobs"]
    wait = lease["wait_seconds"]
    assert f"`max_jobs`? ({max_jobs['minimum']:g}-{max_jobs['maximum']:g}, default " \
           f"{max_jobs['default']})" in TEXT
    assert f"`wait_seconds`? (a number, {wait['minimum']:g}-{wait['maximum']:g}, default " \
           f"{wait['default']:g})" in TEXT
    assert f"`worker_id`? (default `{lease['worker_id']['default']}`)" in TEXT
    tasks = lease["tasks"]["anyOf"][0]
    assert f"{tasks['maxItems']} task names (`{tasks['items']['pattern']}`)" in TEXT
    assert f"`pool` is a pool's name (`{lease['pool']['pattern']}`)" in TEXT
    token = schemas["HeartbeatRequest"]["properties"]["token"]["maxLength"]
    assert f"| `token` | {token:,} characters |" in TEXT
    error = schemas["ErrorIn"]["properties"]
    assert f"`error.type` is {error['type']['minLength']}-{error['type']['maxLength']} " \
           "characters" in TEXT
    assert f"`error.message` at most {error['message']['maxLength']:,} characters" in TEXT
