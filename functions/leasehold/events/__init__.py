"""Events: job state changes published out (EventBridge or a local log) and event triggers in."""
