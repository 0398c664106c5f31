"""API Gateway request models generated from the API's own pydantic models.

The gateway rejects a malformed body before any code runs; the API function validates it
again with pydantic. Two hand-written validators drifted (the gateway refused
``"priority": null``, which the API accepts), so the gateway's JSON Schema (draft 4) is now
derived from the pydantic model's schema, for the fields the gateway checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import aws_apigateway as apigw
from pydantic import BaseModel

_TYPES = {
    "string": apigw.JsonSchemaType.STRING, "number": apigw.JsonSchemaType.NUMBER,
    "integer": apigw.JsonSchemaType.INTEGER, "boolean": apigw.JsonSchemaType.BOOLEAN,
    "null": apigw.JsonSchemaType.NULL,
}
#: Keywords that only document a property: they never change what validates.
_DOCUMENTATION = {"title", "description", "default", "examples"}
#: pydantic keyword -> JsonSchema keyword argument, for the ones draft 4 has as they are.
_KEYWORDS = {"maxLength": "max_length", "minLength": "min_length", "maximum": "maximum",
             "minimum": "minimum", "enum": "enum", "pattern": "pattern"}


def gateway_schema(model: type[BaseModel], fields: Sequence[str],
                   one_of: Mapping[str, apigw.JsonSchemaType] | None = None) -> apigw.JsonSchema:
    """A draft-4 object schema checking ``fields`` exactly as ``model`` does.

    Other properties are not checked here (the function does); a keyword this converter
    does not know raises, so a model change can never silently loosen or tighten the gateway.
    ``one_of``: properties of which exactly one must be given, not null, with its type
    (``task`` or ``target``: the model's own check, which JSON Schema cannot derive).
    """
    schema = model.model_json_schema()
    properties = {name: _property(f"{model.__name__}.{name}", schema["properties"][name])
                  for name in fields}
    branches = [apigw.JsonSchema(required=[name], properties={name: apigw.JsonSchema(type=kind)})
                for name, kind in (one_of or {}).items()]
    return apigw.JsonSchema(
        schema=apigw.JsonSchemaVersion.DRAFT4, type=apigw.JsonSchemaType.OBJECT,
        required=[name for name in schema.get("required", []) if name in fields],
        properties=properties, one_of=branches or None)


def _property(where: str, prop: Mapping[str, Any]) -> apigw.JsonSchema:
    if "anyOf" in prop:  # pydantic writes ``X | None`` as anyOf [X, {"type": "null"}]
        return apigw.JsonSchema(any_of=[_property(where, variant) for variant in prop["anyOf"]])
    unknown = set(prop) - _DOCUMENTATION - set(_KEYWORDS) - {"type"}
    if unknown:
        raise ValueError(f"{where}: cannot express {sorted(unknown)} in the gateway model")
    kwargs: dict[str, Any] = {_KEYWORDS[key]: value for key, value in prop.items()
                              if key in _KEYWORDS}
    if "type" in prop:
        kwargs["type"] = _TYPES[prop["type"]]
    return apigw.JsonSchema(**kwargs)
