"""The worker image of ECS pools that name no image: the Lambda bundle on Python 3.12, arm64.

The image is built from the very folder the functions run (Leasehold, the application's tasks
and their dependencies, already installed for arm64 Python 3.12) plus the AWS SDK, which
Lambda provides and the bundle therefore leaves out. ``cdk deploy`` builds it with Docker
(``ContainerImage.from_asset``); synth only writes the Dockerfile and stages the folder.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from leasehold.cdk.code import leasehold_requirements

BASE_IMAGE = "public.ecr.aws/docker/library/python:3.12-slim"
#: Where the bundle sits in the image (on ``PYTHONPATH``).
APP_DIR = "/opt/leasehold"


def dockerfile(boto3: str) -> str:
    return f"""\
# Written by leasehold.cdk at synth: the Lambda bundle as an ECS worker image.
FROM --platform=linux/arm64 {BASE_IMAGE}
# The AWS SDK: the Lambda runtime provides it, so the bundle leaves it out.
RUN pip install --no-cache-dir --disable-pip-version-check '{boto3}'
COPY bundle/ {APP_DIR}/
ENV PYTHONPATH={APP_DIR} PYTHONUNBUFFERED=1
# The task definition runs `leasehold worker --pool NAME`.
RUN printf '#!/bin/sh\\nexec python -m leasehold.cli "$@"\\n' > /usr/local/bin/leasehold \\
    && chmod 755 /usr/local/bin/leasehold \\
    && useradd --system --uid 10001 --no-create-home worker
USER worker
"""


class WorkerImage(Construct):
    """A container image asset holding ``bundle`` (the staged Lambda code asset)."""

    def __init__(self, scope: Construct, construct_id: str, *,
                 bundle: s3_assets.Asset) -> None:
        super().__init__(scope, construct_id)
        staged = Path(bundle.asset_path)
        if not staged.is_absolute():
            staged = Path(cdk.Stage.of(self).asset_outdir) / staged  # type: ignore[union-attr]
        boto3 = next((r for r in leasehold_requirements() if r.startswith("boto3")), "boto3")
        with tempfile.TemporaryDirectory(prefix="leasehold-image-") as tmp:
            context = Path(tmp)
            (context / "Dockerfile").write_text(dockerfile(boto3))
            if staged.is_dir():  # absent only when bundling is skipped (cdk ls, other stacks)
                shutil.copytree(staged, context / "bundle")
            else:
                (context / "bundle").mkdir()
            # Staging copies the folder into the cloud assembly now, so it may go after this.
            self.asset = ecr_assets.DockerImageAsset(
                self, "Asset", directory=str(context),
                platform=ecr_assets.Platform.LINUX_ARM64)
        self.image = ecs.ContainerImage.from_docker_image_asset(self.asset)
