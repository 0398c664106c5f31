"""Where a worker pool runs: its VPC, subnets and security groups.

Only the worker pools go into a VPC: they run the task code that reaches the application's
own resources (a database in private subnets). The API, ticker, sweeper, triggers and relay
call AWS APIs only; in a VPC they would need the same endpoints and gain nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import aws_ec2 as ec2

from leasehold.cdk.config import LeaseholdConfig, PoolConfig


@dataclass(frozen=True)
class Network:
    """One pool's network; ``vpc`` None: no VPC of the application's."""

    vpc: ec2.IVpc | None = None
    subnets: ec2.SubnetSelection | None = None
    security_groups: Sequence[ec2.ISecurityGroup] | None = None

    @classmethod
    def of(cls, pool: PoolConfig, config: LeaseholdConfig) -> Network:
        """The pool's own VPC (with its own subnets and groups), or the deployment's with
        the pool's subnets and groups where it names them."""
        if pool.vpc is not None:
            return cls(pool.vpc, pool.subnets, pool.security_groups)
        return cls(config.vpc,
                   pool.subnets if pool.subnets is not None else config.subnets,
                   pool.security_groups if pool.security_groups is not None
                   else config.security_groups)

    @property
    def public(self) -> bool:
        """Whether the selected subnets are public ones (a Fargate task then needs a public
        IP to reach AWS APIs)."""
        return self.subnets is not None and self.subnets.subnet_type == ec2.SubnetType.PUBLIC
