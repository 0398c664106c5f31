"""The CDK app that deploys Leasehold (see app.py)."""
