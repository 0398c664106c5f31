"""Pure domain, no I/O: jobs, states, specs, retry policy, ids, failures, the task registry."""
