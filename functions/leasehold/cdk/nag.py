"""cdk-nag acknowledgments: every suppression names its rule, its construct and its reason.

Acknowledgments are attached to the narrowest construct that needs them (never the stack), so a
new resource that breaks a rule is still reported.
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Record that ``rule`` (e.g. ``AwsSolutions-IAM5[Resource::*]``) is accepted on ``scope``."""
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule, reason=reason))
