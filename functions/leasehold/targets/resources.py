"""The resources an AWS target names, as IAM ARNs, and the ones it may never name.

An action's resource is one of its parameters (``TableName``, ``QueueUrl``, ``TopicArn``,
...), turned into the ARN IAM would check by the builders of :data:`PARAMETERS`, the one
table of them. They are found by walking the operation's input shape with the parameters, so
a table named inside ``TransactItems`` or a bus inside ``PutEvents``' ``Entries`` (``default``
when an entry names none) is found like a top-level one. Each must match one of the grant's
listed ARN patterns (``*`` and ``?`` as IAM reads them), and none may be one of Leasehold's
own (:class:`Own`: its tables, queues, bus and the secrets the deployment names), whatever
the grant lists. A call that names no resource the walk knows is allowed only by a grant of
``["*"]``: what cannot be seen is not assumed to be harmless.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from botocore.model import ListShape, MapShape, Shape, StructureShape


@dataclass(frozen=True)
class Place:
    """Where a name without an ARN lives: the targets role's partition and account, and the
    deployment's region."""

    partition: str = "aws"
    region: str = "us-east-1"
    account: str = "*"

    @classmethod
    def of(cls, role_arn: str | None, region: str) -> Place:
        parts = (role_arn or "").split(":")
        if len(parts) >= 5 and parts[0] == "arn":
            return cls(parts[1] or "aws", region, parts[4] or "*")
        return cls(region=region)

    def arn(self, service: str, resource: str, *, region: bool = True,
            account: bool = True) -> str:
        return (f"arn:{self.partition}:{service}:{self.region if region else ''}:"
                f"{self.account if account else ''}:{resource}")


def _arn_or(build: Callable[[str, Place], str]) -> Callable[[str, Place], str]:
    return lambda value, place: value if value.startswith("arn:") else build(value, place)


def _queue(url: str, place: Place) -> str:
    # https://sqs.<region>.amazonaws.com/<account>/<name> (or a local endpoint's path).
    parts = [p for p in urllib.parse.urlsplit(url).path.split("/") if p]
    if len(parts) >= 2:
        return Place(place.partition, place.region, parts[-2]).arn("sqs", parts[-1])
    return place.arn("sqs", parts[-1] if parts else url)


def _function(value: str, place: Place) -> str:
    if value.startswith("arn:"):
        return value
    parts = value.split(":")
    if len(parts) >= 3 and parts[1] == "function":  # 123456789012:function:name[:qualifier]
        return Place(place.partition, place.region, parts[0]).arn("lambda", ":".join(parts[1:]))
    return place.arn("lambda", f"function:{value}")


def _secret(value: str, place: Place) -> str:
    # A secret's ARN ends with six random characters its name does not carry.
    return value if value.startswith("arn:") else place.arn("secretsmanager",
                                                          f"secret:{value}-??????")


def _parameter(value: str, place: Place) -> str:
    return value if value.startswith("arn:") else \
        place.arn("ssm", f"parameter/{value.lstrip('/')}")


Builder = Callable[[str, Place], str]
#: service -> parameter -> the ARN its value names. The one place a resource parameter is
#: known; a service or parameter missing here names nothing (so needs a ``["*"]`` grant).
PARAMETERS: dict[str, dict[str, Builder]] = {
    "dynamodb": {"TableName": _arn_or(lambda v, p: p.arn("dynamodb", f"table/{v}")),
                 "TableArn": _arn_or(lambda v, p: p.arn("dynamodb", f"table/{v}")),
                 "ResourceArn": _arn_or(lambda v, p: p.arn("dynamodb", f"table/{v}"))},
    "sqs": {"QueueUrl": _queue, "QueueName": lambda v, p: p.arn("sqs", v)},
    "sns": {"TopicArn": _arn_or(lambda v, p: p.arn("sns", v)),
            "TargetArn": _arn_or(lambda v, p: p.arn("sns", v))},
    "lambda": {"FunctionName": _function},
    "stepfunctions": {"stateMachineArn": _arn_or(lambda v, p: p.arn("states",
                                                                    f"stateMachine:{v}")),
                      "executionArn": _arn_or(lambda v, p: p.arn("states", f"execution:{v}"))},
    "events": {"EventBusName": _arn_or(lambda v, p: p.arn("events", f"event-bus/{v}"))},
    "s3": {"Bucket": _arn_or(lambda v, p: p.arn("s3", v, region=False, account=False))},
    "secretsmanager": {"SecretId": _secret},
    "ssm": {"Name": _parameter},
    "kinesis": {"StreamName": _arn_or(lambda v, p: p.arn("kinesis", f"stream/{v}")),
                "StreamARN": _arn_or(lambda v, p: p.arn("kinesis", f"stream/{v}"))},
    "firehose": {"DeliveryStreamName": _arn_or(
        lambda v, p: p.arn("firehose", f"deliverystream/{v}"))},
}
#: A parameter a service reads as a default when it is left out (a PutEvents entry without
#: ``EventBusName`` goes to the account's default bus).
DEFAULTS: dict[tuple[str, str], str] = {("events", "EventBusName"): "default"}
#: Maps whose keys are resource names (BatchGetItem's and BatchWriteItem's ``RequestItems``).
KEYED: dict[tuple[str, str], str] = {("dynamodb", "RequestItems"): "TableName"}


def named(service: str, shape: Shape | None, parameters: Mapping[str, Any],
          place: Place) -> list[tuple[str, str]]:
    """Every resource the call names: (the parameter's path, its ARN)."""
    table = PARAMETERS.get(service, {})
    if shape is None or not table:
        return []
    return list(_walk(service, table, shape, parameters, "", place))


def _walk(service: str, table: Mapping[str, Builder], shape: Shape, value: Any, path: str,
          place: Place) -> Iterator[tuple[str, str]]:
    if isinstance(shape, StructureShape) and isinstance(value, Mapping):
        members = shape.members
        if service == "s3" and "Bucket" in value and "Key" in members and "Key" in value:
            # An object action's resource is the object: bucket/key.
            yield (_join(path, "Key"), f"arn:{place.partition}:s3:::{value['Bucket']}/"
                                       f"{value['Key']}")
        for name, member in members.items():
            here = _join(path, name)
            if name in table and not (service == "s3" and name == "Bucket" and "Key" in value
                                      and "Key" in members):
                given = value.get(name, DEFAULTS.get((service, name)))
                if isinstance(given, str):
                    yield here, table[name](given, place)
            if (service, name) in KEYED and isinstance(value.get(name), Mapping):
                build = table[KEYED[(service, name)]]
                for key in value[name]:
                    yield f"{here}.{key}", build(str(key), place)
            if name in value:
                yield from _walk(service, table, member, value[name], here, place)
    elif isinstance(shape, ListShape) and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(service, table, shape.member, item, f"{path}[{i}]", place)
    elif isinstance(shape, MapShape) and isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk(service, table, shape.value, item, f"{path}.{key}", place)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


@cache
def _pattern(pattern: str) -> re.Pattern[str]:
    """An IAM resource pattern: ``*`` any run of characters, ``?`` any one, case-sensitive."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c)
                              for c in pattern), re.DOTALL)


def matches(pattern: str, arn: str) -> bool:
    return _pattern(pattern).fullmatch(arn) is not None


@dataclass(frozen=True)
class Own:
    """Leasehold's own resources, as IAM patterns in any region and account: an AWS target
    may never name one, whatever its grant lists (a wildcard included)."""

    patterns: tuple[str, ...] = ()

    @classmethod
    def of(cls, *, tables: tuple[str, ...] = (), queue_prefix: str | None = None,
           queue_urls: tuple[str, ...] = (), bus: str | None = None,
           secrets: tuple[str, ...] = ()) -> Own:
        found: list[str] = []
        for name in tables:
            found += [f"arn:*:dynamodb:*:*:table/{name}", f"arn:*:dynamodb:*:*:table/{name}/*"]
        if queue_prefix:
            found.append(f"arn:*:sqs:*:*:{queue_prefix}-*")
        for url in queue_urls:
            found.append(f"arn:*:sqs:*:*:{url.rstrip('/').rsplit('/', 1)[-1]}")
        if bus and not bus.startswith("file:"):
            found.append(bus if bus.startswith("arn:") else f"arn:*:events:*:*:event-bus/{bus}")
        for where in secrets:
            kind, _, ident = where.partition(":")
            if ident.startswith("arn:"):
                found.append(ident if kind == "ssm" else f"{ident}*")
            elif kind == "ssm":
                found.append(f"arn:*:ssm:*:*:parameter/{ident.lstrip('/')}")
            else:
                found.append(f"arn:*:secretsmanager:*:*:secret:{ident}-*")
        return cls(tuple(dict.fromkeys(found)))

    def holds(self, arn: str) -> bool:
        # Both ways: a named pattern (a secret by name) that could cover one of ours is ours.
        return any(matches(own, arn) or matches(arn, own) for own in self.patterns)
