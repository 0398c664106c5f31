"""The polling worker: what an ECS pool's tasks run (``leasehold worker``), what
``leasehold dev``'s workers run, and the queue picker the deployed ``POST /workers/lease``
shares with them (``leasehold.remote.leasing``). Production code, below both ``local`` (the
laptop runtime) and ``remote`` (workers in any language over HTTP).

- :mod:`~leasehold.polling.poller`: the poll loop and its runner threads;
- :mod:`~leasehold.polling.priorities`: which of a pool's three queues is asked first;
- :mod:`~leasehold.polling.fairness`: the least busy tenant first, within a batch;
- :mod:`~leasehold.polling.task_protection`: ECS scale-in protection while jobs run.
"""
