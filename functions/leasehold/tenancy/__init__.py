"""Tenancy: admission (rate, live-job cap, backlog), per-tenant counters, stats and listing."""
