"""Bulk actions on a tenant's jobs: retry, cancel, redrive or delete every job a search
matches, as a Leasehold job of its own (``leasehold.bulk``), resumable from its checkpoint."""
