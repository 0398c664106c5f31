"""Drive the api handler with API Gateway REST proxy events, as the local gateway does."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from leasehold.api.app import handle
from leasehold.api.context import ApiConfig
from leasehold.lifecycle.app import Leasehold
from leasehold.local.gateway import proxy_event
from leasehold.tenancy.admission import Limits


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any


class ApiClient:
    def __init__(self, app: Leasehold, config: ApiConfig | None = None) -> None:
        self.app = app
        self.config = config or ApiConfig(trust_tenant_header=True)

    def call(self, method: str, path: str, body: Any = None, *, tenant: str | None = None,
             raw: str | bytes | None = None, headers: dict[str, str] | None = None,
             event: dict[str, Any] | None = None) -> Reply:
        sent = dict(headers or {})
        if tenant is not None:
            sent["X-Leasehold-Tenant"] = tenant
        data = raw if raw is not None else (None if body is None else json.dumps(body))
        if data is not None:
            sent.setdefault("Content-Type", "application/json")
        proxy = event or proxy_event(method, path, sent, data)
        response = handle(self.app, proxy, None, self.config)
        text = response.get("body") or ""
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text
        headers = dict(response.get("headers") or {})
        for name, values in (response.get("multiValueHeaders") or {}).items():
            headers[name] = ", ".join(str(v) for v in values)
        return Reply(response["statusCode"], headers, parsed)

    def get(self, path: str, **kwargs: Any) -> Reply:
        return self.call("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Reply:
        return self.call("POST", path, body, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Reply:
        return self.call("DELETE", path, **kwargs)


def api_for(app: Leasehold, **limits: Any) -> ApiClient:
    """A client trusting the tenant header, under these admission limits (none given: the
    app's settings, the ones its workers apply too)."""
    return ApiClient(app, ApiConfig(trust_tenant_header=True,
                                    limits=Limits(**limits) if limits else None))
