"""An application's own task package, deployed with the ``Leasehold`` construct (app.py)."""

from greeter import reminders  # noqa: F401  (its task registers with greeter.tasks's)
