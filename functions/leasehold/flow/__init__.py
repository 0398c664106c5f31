"""Keyed flow control: options a job (or its task) asks for that shape when and whether it
runs, each wired in by :mod:`leasehold.compose` through the lifecycle's hooks (submission
intakes, store companions, lease refusals, sweeper hooks); the lifecycle never imports them.
"""
