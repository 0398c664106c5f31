"""The HTTP API: a Powertools REST resolver over API Gateway proxy events.

``leasehold.api.app`` builds the resolver from one router per concern; the Lambda entry
point (``leasehold.handlers.api``) and the local gateway both call :func:`app.handle`.
"""
