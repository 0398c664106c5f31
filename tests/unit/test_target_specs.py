"""A target in the one spec resolution every way of making a job shares: bad input is a
ValidationError naming the field; a good target becomes its built-in task's job, with the
per-host flow control and timeout it implies under the job's own values."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec, resolve
from leasehold.errors import ValidationError
from leasehold.targets import register
from leasehold.targets.config import TargetConfig

CONFIG = TargetConfig.parse({
    "http_secrets": {"partner-api-key": {"secret": "secretsmanager:partner",
                                         "origins": ["https://api.partner.example"]}},
    "http_hosts": {"api.partner.example": {"concurrency": 4, "rate_per_second": 10},
                   "slow.example": {"concurrency": 1, "rate_per_second": 0.5}},
    "aws_targets": [{"action": "sns:Publish", "resources": ["*"]}],
})
# AWS targets run only where a targets role is configured (leasehold.targets.credentials).
CONFIG = dataclasses.replace(CONFIG, role_arn="arn:aws:iam::123456789012:role/targets")

BAD_TARGETS: list[tuple[dict[str, Any], str]] = [
    ({"http": {"url": "ftp://example.com/x"}}, "target.http.url"),
    ({"http": {"url": "http://user:pw@example.com/"}}, "target.http.url"),
    ({"http": {"url": "http://169.254.169.254/"}}, "target.http.url"),
    ({"http": {"url": "https://example.com", "method": "BREW"}}, "target.http.method"),
    ({"http": {"url": "https://example.com", "method": "POST", "body": "x" * 200_000}},
     "target.http.body"),
    ({"http": {"url": "https://example.com", "headers": {"Authorization": "Bearer x"}}},
     "target.http.headers.Authorization"),
    ({"http": {"url": "https://example.com", "headers": {"cookie": "a=b"}}},
     "target.http.headers.cookie"),
    ({"http": {"url": "https://example.com", "auth": {"secret_header": {
        "name": "Authorization", "secret": "nope"}}}}, "target.http.auth.secret_header.secret"),
    ({"http": {"url": "https://example.com", "timeout_seconds": 901}},
     "target.http.timeout_seconds"),
    ({"http": {"url": "https://example.com", "success": "2yy"}}, "target.http.success"),
    ({"http": {"url": "https://example.com", "verb": "GET"}}, "target.http"),
    ({"http": {"url": "https://example.com", "response_headers": ["Set-Cookie"]}},
     "target.http.response_headers"),
    ({"http": {"url": "http://[::1/x"}}, "target.http.url"),
    ({"http": {"url": "https://exämple.com/"}}, "target.http.url"),
    ({"http": {"url": "https://example.com", "headers": {"X-Name": "zoë"}}},
     "target.http.headers.X-Name"),
    ({"http": {"url": 7}}, "target.http.url"),
    ({"http": "https://example.com"}, "target.http"),
    ({"smtp": {}}, "target"),
    ({"http": {}, "aws": {}}, "target"),
    ({"aws": {"service": "sns", "action": "Publish", "parameters": {"Nope": 1}}},
     "target.aws.parameters"),
    ({"aws": {"service": "sns", "action": "DeleteTopic", "parameters": {}}},
     "target.aws.action"),
]


@pytest.fixture
def registry() -> TaskRegistry:
    made = TaskRegistry()
    made.task("echo")(lambda payload, ctx: payload)
    register(made, CONFIG, "default")
    return made


def resolved(registry: TaskRegistry, **spec: Any) -> Any:
    return resolve(JobSpec(**spec), registry, pools=("default", "batch"), now_ms=0,
                   timeout_limits={"default": 890.0})


@pytest.mark.parametrize(("target", "field"), BAD_TARGETS)
def test_bad_input_is_refused_naming_the_field(
        registry: TaskRegistry, target: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        resolved(registry, target=target)
    assert caught.value.field == field


def test_task_and_target_together_payload_with_a_target_or_neither_are_refused(
        registry: TaskRegistry) -> None:
    target = {"http": {"url": "https://a.example"}}
    with pytest.raises(ValidationError, match="not both"):
        resolved(registry, task="echo", target=target)
    with pytest.raises(ValidationError) as caught:
        resolved(registry, target=target, payload={"a": 1})
    assert caught.value.field == "payload"
    with pytest.raises(ValidationError, match="or target"):
        resolved(registry)
    with pytest.raises(ValidationError, match="internal"):
        resolved(registry, task="leasehold.http", payload={"url": "http://127.0.0.1/"})


def test_an_http_target_carries_its_host_s_key_limits_and_timeout(
        registry: TaskRegistry) -> None:
    spec = resolved(registry, target={"http": {"url": "https://API.partner.example/v1?q=1#f",
                                               "method": "post", "body": {"id": 7},
                                               "timeout_seconds": 60}})
    assert spec.task == "leasehold.http" and spec.pool == "default"
    assert spec.timeout_seconds == 62.0
    assert spec.gate["concurrency"]["key"] == "http:api.partner.example"
    assert spec.gate["concurrency"]["limit"] == 4
    assert spec.gate["throttle"]["limit"] == 10 and spec.gate["throttle"]["period_ms"] == 1000
    other = resolved(registry, target={"http": {"url": "http://other.example:8080/"}})
    assert other.gate["concurrency"] == {"key": "http:other.example:8080",
                                         "slot": "default#flow#http:other.example:8080",
                                         "limit": 10}
    assert "throttle" not in other.gate
    slow = resolved(registry, target={"http": {"url": "http://slow.example/"}})
    assert slow.gate["throttle"]["limit"] == 1 and slow.gate["throttle"]["period_ms"] == 2000


def test_the_job_s_own_flow_control_timeout_and_pool_win_over_the_target_s(
        registry: TaskRegistry) -> None:
    spec = resolved(registry, target={"http": {"url": "https://api.partner.example/"}},
                    concurrency={"key": "partner-all", "limit": 1}, timeout_seconds=120,
                    pool="batch")
    assert spec.gate["concurrency"]["key"] == "partner-all"
    assert spec.gate["concurrency"]["limit"] == 1
    assert spec.timeout_seconds == 120.0 and spec.pool == "batch"


def test_a_call_longer_than_the_pool_s_attempt_limit_is_refused(registry: TaskRegistry) -> None:
    with pytest.raises(ValidationError) as caught:
        resolved(registry, target={"http": {"url": "https://a.example/", "timeout_seconds": 900}})
    assert caught.value.field == "timeout_seconds" and "at most 890" in str(caught.value)


def test_the_same_target_is_the_same_job_and_another_is_not(registry: TaskRegistry) -> None:
    one = {"http": {"url": "https://a.example/", "method": "POST", "body": {"id": 7}}}
    same = resolved(registry, target=one).spec_hash
    assert resolved(registry, target=one).spec_hash == same
    other = {"http": {**one["http"], "body": {"id": 8}}}
    assert resolved(registry, target=other).spec_hash != same


def test_an_aws_target_names_an_allowed_action_and_valid_parameters(
        registry: TaskRegistry) -> None:
    spec = resolved(registry, target={"aws": {"service": "sns", "action": "Publish",
                                              "parameters": {"TopicArn": "arn:aws:sns:x",
                                                             "Message": "hi"}}})
    assert spec.task == "leasehold.aws" and spec.gate is None


def test_leasehold_dev_allows_loopback_only_over_the_user_s_own_settings() -> None:
    import json

    from leasehold.local.dev_targets import dev_targets
    mine = json.loads(dev_targets(json.dumps({"http_hosts": {"a.example": {"concurrency": 1}},
                                              "http_allow": ["hooks.internal"]})))
    assert mine["http_allow"] == ["127.0.0.0/8", "::1", "hooks.internal"]
    assert mine["http_hosts"] == {"a.example": {"concurrency": 1}}
    config = TargetConfig.parse(json.loads(dev_targets(None)))
    spec = resolve(JobSpec(target={"http": {"url": "http://127.0.0.1:8080/"}}),
                   _registry(config), pools=("default",), now_ms=0)
    assert spec.task == "leasehold.http"
    with pytest.raises(ValidationError, match="private"):
        resolve(JobSpec(target={"http": {"url": "http://10.0.0.1/"}}), _registry(config),
                pools=("default",), now_ms=0)


def _registry(config: TargetConfig) -> TaskRegistry:
    made = TaskRegistry()
    register(made, config, "default")
    return made


def test_the_cli_takes_a_task_or_a_target_never_both(capsys: pytest.CaptureFixture[str]) -> None:
    from leasehold.cli import main
    assert main(["submit", "echo", "--target", '{"http": {"url": "https://a.example"}}',
                 "--url", "http://127.0.0.1:9"]) != 0
    assert "one of them" in capsys.readouterr().err
