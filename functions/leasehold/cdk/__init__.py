"""Leasehold as a CDK construct library for an application's own CDK app.

``pip install leasehold[infra]`` brings aws-cdk-lib; nothing here is part of the Lambda
bundle (the bundler leaves ``leasehold.cdk`` out), and nothing else in ``leasehold`` imports it.
"""

from leasehold.cdk.config import LeaseholdConfig, PoolConfig
from leasehold.cdk.construct import Leasehold
from leasehold.cdk.taskcheck import TaskCheckError

__all__ = ["Leasehold", "LeaseholdConfig", "PoolConfig", "TaskCheckError"]
