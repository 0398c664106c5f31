"""The conformance kit: a worker in any language checked against docs/protocol.md.

``leasehold conformance --worker "CMD ..." [--exclude case,...]`` starts a ``leasehold dev``
with the conformance task set external (pool ``conf``, a 2 s lease), runs the worker command
as each case needs (several at once, stopped, frozen, killed), and prints one line per case
and a summary; it exits non-zero on any failure. The cases are :data:`cases.CASES`; the task
set the worker must run is docs/protocol.md, "The conformance task set". The project's own
suite (``tests/conformance``) runs these cases against the reference workers.
"""
