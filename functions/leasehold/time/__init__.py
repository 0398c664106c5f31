"""Time: cron expressions, firing policy, schedules (model, store, runs, templates), the ticker
and the leader lease that keeps one ticker loop running."""
