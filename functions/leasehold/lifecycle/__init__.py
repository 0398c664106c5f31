"""The job lifecycle: the store and its one transition primitive, submission, hand-off, the
worker and its consumer, the sweeper, user control, dead letters and the worker fleet."""
