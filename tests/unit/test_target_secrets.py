"""A deployment secret goes only where the deployment binds it (issue 43, defect 2).

Each ``http_secrets`` entry names the origins its value may be sent to, and may name the
tenants that may use it. A target outside them is refused at submission, with an error that
names the secret and the origin and never the value; the older string form (bound to no
origin, so sendable anywhere) is refused at configuration with a message saying how to
write it.
"""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec, resolve
from leasehold.errors import ValidationError
from leasehold.targets import register
from leasehold.targets.config import TargetConfig, origin

CONFIG = TargetConfig.parse({"http_secrets": {
    "partner-api-key": {"secret": "secretsmanager:partner",
                        "origins": ["https://api.partner.example"]},
    "acme-only": {"secret": "ssm:/acme/key", "origins": ["https://hooks.acme.example:8443/"],
                  "tenants": ["acme"]},
}})
FIELD = "target.http.auth.secret_header.secret"


def submitted(url: str, secret: str, tenant: str = "default") -> Any:
    registry = TaskRegistry()
    register(registry, CONFIG, "default")
    target = {"http": {"url": url, "auth": {"secret_header": {"name": "X-Token",
                                                              "secret": secret}}}}
    return resolve(JobSpec(target=target, tenant=tenant), registry, pools=("default",),
                   now_ms=0)


def test_the_attacker_s_url_with_the_partner_s_secret_is_refused_naming_both() -> None:
    with pytest.raises(ValidationError) as caught:
        submitted("https://attacker.example/collect", "partner-api-key")
    assert caught.value.field == FIELD
    assert "partner-api-key" in str(caught.value)
    assert "https://attacker.example:443" in str(caught.value)


@pytest.mark.parametrize("url", [
    "http://api.partner.example/",            # another scheme is another origin
    "https://api.partner.example:8443/",      # another port
    "https://api.partner.example.attacker.example/",
    "https://partner.example/",
])
def test_every_other_origin_is_refused(url: str) -> None:
    with pytest.raises(ValidationError) as caught:
        submitted(url, "partner-api-key")
    assert caught.value.field == FIELD


@pytest.mark.parametrize("url", ["https://api.partner.example/v1/orders?x=1",
                                 "https://API.Partner.example:443/v1",
                                 "https://api.partner.example./"])
def test_the_bound_origin_in_any_spelling_is_accepted(url: str) -> None:
    spec = submitted(url, "partner-api-key")
    assert spec.task == "leasehold.http"


def test_a_secret_bound_to_tenants_is_refused_to_any_other() -> None:
    assert submitted("https://hooks.acme.example:8443/in", "acme-only", "acme").task
    with pytest.raises(ValidationError) as caught:
        submitted("https://hooks.acme.example:8443/in", "acme-only", "globex")
    assert caught.value.field == FIELD
    assert "acme-only" in str(caught.value) and "globex" in str(caught.value)


def test_the_string_form_is_refused_with_how_to_write_it() -> None:
    with pytest.raises(ValidationError) as caught:
        TargetConfig.parse({"http_secrets": {"partner-api-key": "secretsmanager:partner"}})
    assert caught.value.field == "targets.http_secrets.partner-api-key"
    assert '"origins": ["https://' in str(caught.value)


@pytest.mark.parametrize("entry", [
    {"secret": "secretsmanager:x"},
    {"secret": "secretsmanager:x", "origins": []},
    {"secret": "secretsmanager:x", "origins": ["https://a.example/path"]},
    {"secret": "secretsmanager:x", "origins": ["https://user@a.example"]},
    {"secret": "secretsmanager:x", "origins": ["ftp://a.example"]},
    {"secret": "secretsmanager:x", "origins": ["a.example"]},
    {"secret": "vault:x", "origins": ["https://a.example"]},
    {"secret": "secretsmanager:x", "origins": ["https://a.example"], "tenants": []},
    {"secret": "secretsmanager:x", "origins": ["https://a.example"], "hosts": ["a"]},
])
def test_a_bad_secret_entry_is_refused_at_configuration(entry: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        TargetConfig.parse({"http_secrets": {"k": entry}})


def test_an_origin_is_written_one_way() -> None:
    assert origin("https://A.example") == origin("https://a.example:443/x") == \
        "https://a.example:443"
    assert origin("http://[::1]:8080/") == "http://[::1]:8080"
