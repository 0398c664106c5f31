"""The one redaction every text from a target call goes through: each form a server could
echo a secret value in is masked (issue 43, defect 3)."""

from __future__ import annotations

import base64
import json
import urllib.parse

import pytest

from leasehold.targets.redaction import MASK, Redactor

VALUE = "s3cr3t/value+7d1f0c="
BASIC = base64.b64encode(b"svc-user:hunter2-pass").decode()


@pytest.mark.parametrize("echoed", [
    VALUE,
    f"Bearer {VALUE}",
    base64.b64encode(VALUE.encode()).decode(),
    base64.urlsafe_b64encode(VALUE.encode()).decode(),
    base64.b64encode(VALUE.encode()).decode().rstrip("="),
    urllib.parse.quote(VALUE, safe=""),
    json.dumps(VALUE)[1:-1],
])
def test_every_form_of_a_value_is_masked_wherever_it_is(echoed: str) -> None:
    text = Redactor([VALUE]).text(f"you sent: {echoed}; again: {echoed}.")
    assert echoed not in text and VALUE not in text and text.count(MASK) == 2


def test_basic_credentials_are_masked_encoded_and_decoded() -> None:
    redactor = Redactor([BASIC])
    assert redactor.text(f"Basic {BASIC}") == f"Basic {MASK}"
    assert redactor.text("user was svc-user:hunter2-pass") == f"user was {MASK}"


def test_a_json_value_is_masked_in_keys_and_values_at_any_depth() -> None:
    masked = Redactor([VALUE]).value({VALUE: [1, {"h": f"Bearer {VALUE}"}], "n": None})
    assert VALUE not in json.dumps(masked)
    assert masked == {MASK: [1, {"h": f"Bearer {MASK}"}], "n": None}


def test_a_cut_text_ending_in_a_value_s_beginning_is_masked() -> None:
    redactor = Redactor([VALUE])
    assert redactor.text("....." + VALUE[:8], cut=True) == "....." + MASK
    assert redactor.text("....." + VALUE[:8]) == "....." + VALUE[:8]  # uncut: whole forms only


def test_nothing_sent_masks_nothing() -> None:
    redactor = Redactor()
    assert not redactor and redactor.text("anything") == "anything"
