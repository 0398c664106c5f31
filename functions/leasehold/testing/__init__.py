"""Testing tasks without the runtime.

- :func:`make_context`: the ``ctx`` a handler gets, every field defaulted, to call a handler
  directly: ``send_email({"to": "a@example.com"}, make_context())``.
- :func:`run_task`: run a registered task eagerly, with its retries, its JSON encoding and its
  size limits: ``run_task("send-email", {"to": "a@example.com"})``.
- ``leasehold.testing.fixtures``: a pytest plugin whose ``leasehold`` fixture is an
  in-process runtime over moto (:class:`~leasehold.testing.local.LocalLeasehold`).

Only this module's two helpers are imported here; the fixture (and moto) load on use.
"""

from leasehold.testing.context import make_context
from leasehold.testing.eager import Attempts, run_task

__all__ = ["Attempts", "make_context", "run_task"]
