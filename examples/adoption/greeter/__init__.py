"""An application's own task package, deployed with the ``Leasehold`` construct (app.py)."""
