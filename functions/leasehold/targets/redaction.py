"""Redaction: the one function every text stored or emitted from a target call goes through.

A call knows the secret values it sent (``auth.secret_header``); a server may echo them back
in any form: as sent, inside ``Basic``/``Bearer``, base64-encoded (or decoded, for a value
that is itself base64, as Basic credentials are), percent-encoded or JSON-escaped. The
result (body and headers) and the failure (message; its traceback is built from it, with
the chain that could quote the value cut) are redacted before the job records them, so a
row, a job view, an event, a span or a log never holds a value.
"""

from __future__ import annotations

import base64
import binascii
import json
import urllib.parse
from collections.abc import Iterable
from typing import Any

MASK = "[REDACTED]"
#: A decoded base64 value shorter than this is not redacted on its own: it would mask
#: ordinary words (the value itself, in every other form, always is).
_MIN_DECODED = 6
#: The shortest beginning of a form masked at the end of a cut text.
_MIN_PARTIAL = 4


def forms(value: str) -> list[str]:
    """Every form of ``value`` that is redacted, longest first (a longer form is masked
    before a shorter one inside it)."""
    found = {value, urllib.parse.quote(value, safe=""), json.dumps(value)[1:-1]}
    raw = value.encode()
    found |= {base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode(),
              base64.b64encode(raw).decode().rstrip("=")}
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        decoded = ""
    if len(decoded) >= _MIN_DECODED and decoded.isprintable():
        found.add(decoded)
    return sorted((f for f in found if f), key=len, reverse=True)


class Redactor:
    """The secret values one call sent; :meth:`text` and :meth:`value` mask them."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._forms: list[str] = []
        for value in values:
            self.add(value)

    def add(self, value: str) -> None:
        if value:
            self._forms = sorted({*self._forms, *forms(value)}, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._forms)

    def text(self, text: str, *, cut: bool = False) -> str:
        """``text`` with every form masked. ``cut``: the text was truncated, so a form's
        beginning at its very end is masked too."""
        for form in self._forms:
            text = text.replace(form, MASK)
        if cut:
            for form in self._forms:
                for size in range(min(len(form), len(text)) - 1, _MIN_PARTIAL - 1, -1):
                    if text.endswith(form[:size]):
                        return text[:-size] + MASK
        return text

    def value(self, value: Any) -> Any:
        """A JSON value with every string (keys included) redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(item) for item in value]
        return value
