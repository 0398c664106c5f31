"""What ``leasehold dev`` gives jobs with no code: loopback to call, and a targets role.

A deployment refuses loopback and names its targets role in the construct; locally, HTTP
targets may reach this machine's own servers, and sigv4 and AWS targets assume a role made in
the embedded emulator's IAM, so they run the same code as deployed.
"""

from __future__ import annotations

import json

from leasehold.settings import Settings

#: What ``leasehold dev`` lets HTTP targets reach beyond public addresses: loopback only.
DEV_ALLOW = ("127.0.0.0/8", "::1")


def dev_targets(given: str | None) -> str:
    """``LEASEHOLD_TARGETS`` for ``leasehold dev``: the user's own, with loopback allowed."""
    targets = json.loads(given) if given else {}
    targets["http_allow"] = sorted({*targets.get("http_allow", ()), *DEV_ALLOW})
    return json.dumps(targets)


#: The role ``leasehold dev`` makes in its emulator for outbound calls (``<prefix>-targets``).
DEV_TARGETS_ROLE = "{prefix}-targets"


def dev_targets_role(settings: Settings) -> str:
    """The targets role in the emulator's IAM (made once), as the construct makes one on AWS:
    sigv4 and AWS targets assume it, so they run the same code here as deployed. The emulator
    answers AssumeRole with keys of their own; it checks no policy (tests/infra proves the
    deployed role's)."""
    import boto3  # the emulator's IAM, with the local credentials

    iam = boto3.client("iam", region_name=settings.region, endpoint_url=settings.endpoint_url)
    name = DEV_TARGETS_ROLE.format(prefix=settings.queue_prefix)
    account = boto3.client("sts", region_name=settings.region,
                           endpoint_url=settings.endpoint_url).get_caller_identity()["Account"]
    trust = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Action": "sts:AssumeRole",
        "Principal": {"AWS": f"arn:aws:iam::{account}:root"}}]}
    try:
        return str(iam.get_role(RoleName=name)["Role"]["Arn"])
    except iam.exceptions.NoSuchEntityException:
        return str(iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust),
                                   Description="leasehold dev: outbound calls of targets")
                   ["Role"]["Arn"])
