"""The state machine's rules and invariants for unique keys and start windows (issue 22).

Mixed into ``tests.integration.test_stateful.Lifecycle``: unique submissions (library and
API-admitted, some with a start window) race each other and every other rule under the
machine's weather (lost responses, throttles, failures past the retries), crashes, sweeps
and clock jumps. After every step: at most one live job per unique key, each key's claim
names exactly its live job (so none is held at drain, when nothing is live), and no job
that ended EXPIRED ever ran.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from botocore.exceptions import ClientError
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from leasehold.aws.dynamo import from_av
from leasehold.core.flowcontrol import DEBOUNCE_KEY, UNIQUE_KEY
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import LeaseholdError, RateLimited
from leasehold.flow.unique import claim_item
from leasehold.lifecycle.submission import submit
from leasehold.tenancy.admission import Limits, submit_admitted
from tests.integration.stateful_fired import fire

KEYS = ("u0", "u1")
UNIQUE_LIMITS = Limits(rate=1000, burst=1000, max_live=4)


class FlowKeysRules:
    app: Any
    jobs: list[str]
    latest: dict[str, Any]
    runs: Any
    inspect: Any
    manual_retries: Any

    @rule(key=st.sampled_from(KEYS), tenant=st.sampled_from((None, "acme")),
          fail_first=st.integers(0, 2), window=st.sampled_from((None, None, 5, 100)))
    def submit_unique(self, key: str, tenant: str | None, fail_first: int,
                      window: int | None) -> None:
        """A submission with a unique key and no idempotency key: a caller whose try failed
        tries again, and is answered by the job its lost try made, if it landed."""
        spec = JobSpec(task="work", payload={"fail_first": fail_first},
                       tenant=tenant or "default", unique={"key": key},
                       start_within_seconds=window)
        for _ in range(3):
            try:
                if tenant is None:
                    result = submit(self.app, spec)
                else:
                    result = submit_admitted(self.app, spec, "default", UNIQUE_LIMITS)
            except RateLimited:
                break
            except (ClientError, LeaseholdError) as exc:  # the weather: the caller retries
                event(f"a unique submission failed ({type(exc).__name__})")
                continue
            event("a unique duplicate answered" if result.duplicate else
                  "a unique job created")
            break
        # Whatever landed (also a try whose caller saw an error) is a job to follow.
        for job_id, job in self.latest.items():
            if job.extra.get(UNIQUE_KEY) is not None and job_id not in self.jobs:
                self.jobs.append(job_id)

    @rule(key=st.sampled_from(KEYS), n=st.integers(0, 3))
    def submit_debounced(self, key: str, n: int) -> None:
        """An edit in a burst: coalesced into the key's open window, or opening one."""
        spec = JobSpec(task="work", payload={"fail_first": 0, "n": n},
                       debounce={"key": key, "seconds": 5, "max_wait_seconds": 20})
        for _ in range(3):
            try:
                result = submit(self.app, spec)
            except (ClientError, LeaseholdError) as exc:  # the weather: the caller retries
                event(f"a debounced submission failed ({type(exc).__name__})")
                continue
            event("a debounced edit coalesced" if result.coalesced else "a window opened")
            break
        for job_id, job in self.latest.items():
            if job.extra.get(DEBOUNCE_KEY) is not None and job_id not in self.jobs:
                self.jobs.append(job_id)

    @invariant()
    def at_most_one_open_window_per_debounce_key(self) -> None:
        """An open window: QUEUED and never leased (a manual re-run aside). Two at once
        would be two runs of one burst."""
        windows: dict[str, list[str]] = defaultdict(list)
        for job in self.latest.values():
            key = job.extra.get(DEBOUNCE_KEY)
            if key is not None and job.state is JobState.QUEUED and job.attempt == 0 and \
                    job.first_started_at is None and not self.manual_retries[job.job_id]:
                windows[f"{job.tenant}#{key}"].append(job.job_id)
        assert all(len(ids) == 1 for ids in windows.values()), windows
        fire("at most one open window per debounce key (an open window)", len(windows))

    @invariant()
    def one_live_job_per_unique_key_and_its_claim_names_it(self) -> None:
        live: dict[str, list[str]] = defaultdict(list)
        used: set[str] = set()
        for job in self.latest.values():
            key = job.extra.get(UNIQUE_KEY)
            if key is None:
                continue
            used.add(claim_item(job.tenant, key))
            if job.state.live:
                live[claim_item(job.tenant, key)].append(job.job_id)
        for name in used:
            holders = live.get(name, [])
            assert len(holders) <= 1, (name, holders)
            raw = self.inspect.get_item(TableName=self.app.settings.tenants_table,
                                        Key={"tenant": {"S": name}},
                                        ConsistentRead=True).get("Item")
            held = None if raw is None else from_av(raw)["job_id"]
            assert held == (holders[0] if holders else None), (name, held, holders)
            fire("one live job per unique key (a key with a live holder)", bool(holders))

    @invariant()
    def nothing_expired_ever_ran(self) -> None:
        for job in self.latest.values():
            if job.state is JobState.EXPIRED:
                assert self.runs[job.job_id] == 0, job.job_id
                assert job.first_started_at is None, job.job_id
                fire("nothing expired ever ran (an expired job)")
