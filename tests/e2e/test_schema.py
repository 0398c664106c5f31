"""schemathesis against the committed OpenAPI document: no 5xx, no schema violation."""

from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from .conftest import ROOT, Runtime

pytestmark = pytest.mark.e2e

schema = schemathesis.openapi.from_dict(json.loads((ROOT / "docs" / "openapi.json").read_text()))


@schema.parametrize()
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
def test_the_api_honours_its_openapi_document(case: schemathesis.Case, runtime: Runtime) -> None:
    case.call_and_validate(base_url=runtime.url,
                           checks=[not_a_server_error, response_schema_conformance])
