"""Per-task figures for people: succeeded, failed, and duration and queue-wait percentiles over
the last hour and day, kept as stored aggregates (:mod:`leasehold.metrics.figures`)."""
