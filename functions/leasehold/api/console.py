"""Routes for the web console: the page at ``/`` and its files at ``/console/<name>``.

Static files need no tenant: they hold no data; the page's own API calls are authorised as any
other call (locally by the tenant header, behind API Gateway by the caller's identity).
"""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from leasehold import console
from leasehold.errors import NotFound

router = Router()


class NoSuchFile(NotFound):
    """The console has no such file."""

    code = "not_found"


def _serve(path: str) -> Response[str]:
    found = console.route(path)
    if found is None:
        raise NoSuchFile()
    return Response(status_code=200, content_type=found.content_type,
                    body=found.body.decode(), headers=dict(console.HEADERS))


@router.get("/", include_in_schema=False)
def page() -> Response[str]:
    return _serve("/")


@router.get("/console/<name>", include_in_schema=False)
def file(name: str) -> Response[str]:
    return _serve(f"/console/{name}")
