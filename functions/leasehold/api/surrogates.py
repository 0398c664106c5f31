"""Lone surrogates: JSON can spell them (``"\\ud800"``), but they are not text.

Python's JSON parser lets ``"\\ud800"`` through as a string that cannot be encoded as UTF-8,
so it would pass validation and fail later, when the job is written (a 500). The API reads
such a body as unreadable instead: a 400 naming where it is, before anything is written.
"""

from __future__ import annotations

import json
import re
from typing import Any

from leasehold.api.errors import field_path

#: A cheap test before parsing: only bodies that spell a surrogate escape need a closer look.
_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _find(value: Any, path: tuple[str | int, ...]) -> tuple[str | int, ...] | None:
    if isinstance(value, str):
        return path if _SURROGATE.search(value) else None
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _find(item, (*path, index))
            if found is not None:
                return found
    if isinstance(value, dict):
        for key, item in value.items():
            if _SURROGATE.search(key):
                return path  # a bad key: name the object that holds it
            found = _find(item, (*path, key))
            if found is not None:
                return found
    return None


def lone_surrogate(body: str) -> str | None:
    """Where the JSON ``body`` holds a lone surrogate (``"payload.a[0]"``; ``"body"`` at the
    top), or None. A body that is not JSON is left to the usual 400."""
    if not _ESCAPE.search(body):
        return None
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    found = _find(parsed, ())
    if found is None:
        return None
    return field_path(found) or "body"
