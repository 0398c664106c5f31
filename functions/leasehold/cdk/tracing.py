"""``LeaseholdConfig(tracing=...)``: what each function traces, and where the spans go.

- ``xray`` (the default, as before): Lambda's active tracing. X-Ray records each
  invocation's segment (sampled: 1 request a second and 5% of the rest by default). Costs
  $5.00 per million traces recorded and $0.50 per million retrieved (first 100,000 recorded
  and 1,000,000 retrieved a month free). Leasehold's job spans are not exported.
- ``otel``: as ``xray``, plus the AWS Distro for OpenTelemetry Python layer
  (``AWS_LAMBDA_EXEC_WRAPPER=/opt/otel-instrument``): it sets up the OpenTelemetry SDK in
  every function, so Leasehold's ``leasehold submit/run/step`` spans (and botocore's, the
  layer instruments it) are exported by the collector the layer runs as a Lambda extension,
  to X-Ray by default (same prices; a job's trace has one segment per span). The layer
  costs no fee; it adds to each cold start (about 200-400 ms) and to the memory used, and
  the extension's flush at each invocation's end is billed duration (a few ms). Another
  backend: set ``OPENTELEMETRY_COLLECTOR_CONFIG_URI`` on the functions to a collector
  configuration of your own (``otlphttp`` exporter), as the ADOT documentation says.
- ``off``: no active tracing, no layer: no X-Ray cost, and the spans are the API's no-op.

In every mode the trace context a job continues is kept on its row (``leasehold.tracing``),
so a worker deployed with ``otel`` later continues the traces of jobs submitted before.
"""

from __future__ import annotations

from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from leasehold.cdk.functions import LeaseholdFunction

TRACING_CHOICES = ("otel", "xray", "off")


def apply_tracing(scope: Construct, mode: str) -> None:
    """Give every Leasehold function under ``scope`` the tracing ``mode`` asks for."""
    if mode not in TRACING_CHOICES:
        raise ValueError(f"tracing must be one of {', '.join(TRACING_CHOICES)}, not {mode!r}")
    for node in scope.node.find_all():
        if not isinstance(node, LeaseholdFunction):
            continue
        function = node.function
        cfn = function.node.default_child
        assert isinstance(cfn, lambda_.CfnFunction)
        if mode == "off":
            cfn.tracing_config = None
            continue
        if mode == "otel":
            arn = lambda_.AdotLambdaLayerPythonSdkVersion.LATEST.layer_arn(
                function.stack, function.architecture)
            function.add_layers(lambda_.LayerVersion.from_layer_version_arn(node, "Adot", arn))
            function.add_environment("AWS_LAMBDA_EXEC_WRAPPER", "/opt/otel-instrument")
            function.add_environment("OTEL_SERVICE_NAME", node.node.id)
