"""An application's own CDK app that deploys Leasehold with the application's tasks.

``python app.py`` (or ``cdk synth`` with ``"app": "python app.py"``) from any folder: paths
are relative to this file. tests/infra/test_adoption.py synthesizes it with real bundling.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, ServerlessChecks

from leasehold.cdk import Leasehold, LeaseholdConfig, PoolConfig

HERE = Path(__file__).resolve().parent


def main() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "Greeter", description="The greeter application's job scheduler")
    jobs = Leasehold(
        stack, "Jobs",
        code=[HERE / "greeter"], tasks=["greeter.tasks"],
        requirements=HERE / "requirements.txt",
        # A Lambda pool, and an ECS pool whose image is built from the same bundle.
        pools=[PoolConfig(name="default"), PoolConfig(name="batch", kind="ecs")],
        # The application submits this task: synth fails unless greeter.tasks registers it.
        required_tasks=["greeter.greet"],
        config=LeaseholdConfig(prefix="greeter"),
    )
    cdk.CfnOutput(stack, "ApiUrl", value=jobs.api.url)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))
    app.synth()


if __name__ == "__main__":
    main()
