"""The mutant set: bugs this project fixed, each as a small text edit that puts it back.

A mutant is one or more :class:`Edit` s against ``functions/``: an ``old`` snippet that
occurs exactly once in its file, and the ``new`` text that replaces it. A unique snippet
(not a line number) survives unrelated edits and merges; when a refactor changes the
snippet itself, ``tests/unit/test_mutants.py`` fails until the mutant is brought up to
date, so a mutant never goes stale in silence.

Each mutant names its bug, the commit or issue that fixed it, and its own regression test
(``path::name`` under ``tests/``): ``make mutants`` (:mod:`tests.mutants.run`) applies each to
a scratch copy of the tree and runs the state machine, then the regression test, against it.
New fixes add their mutant here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Edit:
    """Replace the one occurrence of ``old`` in ``path`` (under the repository) with ``new``."""

    path: str
    old: str
    new: str


@dataclass(frozen=True)
class Mutant:
    name: str
    #: The bug this mutant puts back, as its fix described it.
    bug: str
    #: The commit (or issue and defect) that fixed it.
    fixed_in: str
    #: The fix's own regression test, ``tests/...::test_name`` (a parametrized test runs all).
    regression: str
    edits: tuple[Edit, ...]


F = "functions/leasehold/"

MUTANTS: tuple[Mutant, ...] = (
    # -- the core lease protocol --------------------------------------------------------
    Mutant(
        "finish-fenced-by-state",
        "A worker's finish is fenced by the job's state only, not its epoch and lease owner: "
        "a zombie whose lease was taken over records its outcome over the new owner's.",
        "the lease protocol (docs/design.md, 'The lease protocol')",
        "tests/integration/test_lease_fences.py::"
        "test_a_zombie_can_neither_heartbeat_nor_finish_while_its_successor_runs",
        (Edit(F + "lifecycle/store.py",
              '        if change.owner is not None:\n'
              '            condition.append("lease_owner = :owner")\n'
              '            values[":owner"] = change.owner\n',
              '        if change.owner is not None:\n'
              '            condition = ["#state = :source"]\n'
              '            values = {":source": job.state.value}\n'),
         )),
    Mutant(
        "sweeper-takes-a-live-lease",
        "The sweeper counts a lease as expired up to two lease periods early, and takes over "
        "RUNNING jobs whose workers still hold their leases.",
        "the lease protocol (the sweeper's cutoff: past the skew grace only)",
        "tests/integration/test_lifecycle.py::"
        "test_a_worker_that_dies_after_leasing_is_recovered_by_the_sweeper",
        (Edit(F + "lifecycle/sweeper.py",
              "    cutoff = now - int(app.settings.skew_grace_seconds * 1000)\n",
              "    cutoff = now + 2 * int(app.settings.lease_seconds * 1000)\n"),
         )),
    Mutant(
        "cancelled-job-keeps-its-slot",
        "A counted job that ends CANCELLED keeps its tenant's live slot (and its outcome is "
        "not counted): the tenant's cap fills with cancelled jobs.",
        "tenant admission (issue 18); combination cancel x cap (issue 29)",
        "tests/integration/test_combinations_flow.py::"
        "test_a_cancel_of_a_job_held_by_flow_control_or_asleep_gives_back_everything_it_holds",
        (Edit(F + "tenancy/counters.py",
              "        if job.state.live and target.terminal:\n",
              "        if job.state.live and target.terminal \\\n"
              "                and target is not JobState.CANCELLED:\n"),
         )),
    Mutant(
        "requeue-without-epoch-bump",
        "A job re-queued for its next lease (a retry, a lost worker's recovery) keeps its "
        "epoch: the previous lease's message, or a duplicate of it, leases it again.",
        "the lease protocol (every entry into QUEUED bumps the epoch)",
        "tests/integration/test_lease_fences.py::"
        "test_a_copy_of_the_first_attempts_message_never_leases_the_retry",
        (Edit(F + "lifecycle/endings.py",
              "                      bump_epoch=True, set=sets, increment=increment or {},\n",
              "                      bump_epoch=False, set=sets, increment=increment or {},\n"),
         )),
    Mutant(
        "heartbeat-extends-a-lost-lease",
        "A heartbeat is fenced by the job's state only: a zombie worker extends the lease of a "
        "job another worker now holds.",
        "the lease protocol (a heartbeat is conditioned on epoch and owner)",
        "tests/integration/test_lease_fences.py::"
        "test_a_zombie_can_neither_heartbeat_nor_finish_while_its_successor_runs",
        (Edit(F + "lifecycle/store.py",
              '                ["#state = :running", "epoch = :epoch", "lease_owner = :owner"],\n'
              '                {":running": JobState.RUNNING.value, ":epoch": job.epoch, '
              '":owner": owner},\n',
              '                ["#state = :running"], {":running": JobState.RUNNING.value},\n'),
         )),
    # -- issue 29's thirteen seam defects -----------------------------------------------
    Mutant(
        "sleeper-woken-into-a-full-key",
        "A durable job whose short sleep wakes while its key is full is neither parked nor "
        "woken when the slot frees: SLEEPING with no message until the hand-off deadline.",
        "cb0847b (issue 29, defect 1)",
        "tests/integration/test_flow_concurrency.py::"
        "test_a_sleeper_woken_while_its_key_is_full_parks_and_starts_when_the_slot_frees",
        (Edit(F + "flow/gate.py",
              "        waits = job.state in (JobState.QUEUED, JobState.SLEEPING) and "
              "job.epoch == epoch\n",
              "        waits = job.state is JobState.QUEUED and job.epoch == epoch\n"),
         )),
    Mutant(
        "step-effects-move-to-the-finish",
        "ctx.transact inside ctx.step joins the attempt's finish instead of the step's record: "
        "an attempt that sleeps after the step loses the effect for good.",
        "cb21e9a (issue 29, defect 2)",
        "tests/integration/test_transact_effects.py::"
        "test_effects_inside_a_step_apply_once_with_the_step_though_a_sleep_follows_under_lost_responses",
        (Edit(F + "core/context.py",
              "        outer, outer_bytes = self._effects, self._effect_bytes\n"
              "        self._effects, self._effect_bytes = [], 0\n"
              "        try:\n"
              "            yield self._effects\n"
              "        finally:\n"
              "            self._effects, self._effect_bytes = outer, outer_bytes\n",
              "        yield []\n"),
         )),
    Mutant(
        "refused-effect-strands-the-job",
        "An effect whose own condition fails escapes the worker: the job stays RUNNING for its "
        "whole lease and ends DEAD as 'the worker was lost'.",
        "cb21e9a (issue 29, defect 3)",
        "tests/integration/test_transact_effects.py::"
        "test_an_effect_whose_own_condition_fails_fails_the_attempt_at_once_and_names_it",
        (Edit(F + "lifecycle/worker.py",
              "                                    where=\"the job's success\")\n"
              "            if refused is None:\n"
              "                raise\n",
              "                                    where=\"the job's success\")\n"
              "            if refused is None or refused:\n"
              "                raise\n"),
         )),
    Mutant(
        "spawn-bypasses-the-intakes",
        "ctx.spawn writes the child directly: a child task's unique default (and start window) "
        "is ignored.",
        "71b60f5 (issue 29, defect 4)",
        "tests/integration/test_durable_children.py::"
        "test_a_spawn_goes_through_the_intakes_and_a_unique_child_is_answered_by_its_live_holder",
        (Edit(F + "durable/children.py",
              '        return through_intakes(app, spec, create)(row, [{"Update": slot}] '
              'if slot else [])\n',
              '        return create(row, [{"Update": slot}] if slot else [])\n'),
         )),
    Mutant(
        "parent-end-leaves-children-running",
        "A parent that ends (cancelled, dead) leaves its cancel-policy children running.",
        "71b60f5 (issue 29, defect 5)",
        "tests/integration/test_durable_children.py::"
        "test_a_parent_that_ends_cancels_its_live_children_and_abandon_keeps_one",
        (Edit(F + "durable/children.py",
              "        if child.state.live and child.extra.get(PARENT) == parent_id:\n",
              "        if child.state.live and child.extra.get(PARENT) == parent_id and False:\n"),
         )),
    Mutant(
        "children-take-no-slot",
        "Spawned children take no live-job slot: a tenant capped at 1 runs any number of them.",
        "71b60f5 (issue 29, defect 6)",
        "tests/integration/test_durable_children.py::"
        "test_children_take_slots_under_the_tenant_cap_and_a_spawn_over_it_waits",
        (Edit(F + "durable/children.py",
              "        answer = slot_admitted(app, parent.tenant, limits, write)\n",
              "        answer = write({}, -1)\n"),
         )),
    Mutant(
        "deadline-does-not-bound-the-attempt",
        "deadline_seconds does not bound the running attempt: an attempt started just before "
        "the job's deadline is told it may run its whole timeout.",
        "c4d729d (issue 29, defect 7)",
        "tests/integration/test_durable.py::"
        "test_an_attempt_started_just_before_the_job_s_deadline_is_stopped_at_it",
        (Edit(F + "lifecycle/worker.py",
              "        cut_short = cut < ends\n",
              "        cut_short = False\n"),
         Edit(F + "lifecycle/worker.py",
              "            deadline_ms=min(cut, ends), labels=job.labels,\n",
              "            deadline_ms=ends, labels=job.labels,\n")),
    ),
    Mutant(
        "retry-does-not-rearm-callbacks",
        "A manual re-run counts no new run: a job retried after CallbackTimeout finds its "
        "callback still timed out and dies again at once.",
        "cb21e9a (issue 29, defect 8)",
        "tests/integration/test_durable_retry.py::"
        "test_a_job_dead_on_callback_timeout_retried_waits_again_with_a_fresh_timeout_keeping_steps",
        (Edit(F + "durable/runs.py",
              "    return {RUN: current(job) + 1}\n",
              "    return {RUN: current(job)}\n"),
         )),
    Mutant(
        "bulk-unbounded-by-its-request",
        "A bulk action acts on what its search finds when it runs, including jobs created "
        "after the request (and after its dry run).",
        "f78168b (issue 29, defect 9)",
        "tests/integration/test_bulk.py::"
        "test_a_bulk_action_acts_only_on_jobs_created_up_to_its_request_across_a_crash",
        (Edit(F + "bulk/run.py",
              "    bound = asked_at + 1  # created_before excludes its own millisecond\n",
              "    return where\n    bound = asked_at + 1\n"),
         )),
    Mutant(
        "bulk-delete-without-its-guard",
        "A bulk delete removes a failed workflow's step (and a live parent's child): the "
        "workflow's retry then runs the dependent without it.",
        "f78168b (issue 29, defect 10)",
        "tests/integration/test_bulk_references.py::"
        "test_a_bulk_delete_keeps_a_failed_workflows_steps_and_says_why_and_the_retry_works",
        (Edit(F + "lifecycle/deletion.py",
              "    done = Deletion(referenced=referenced(app, jobs))\n",
              "    done = Deletion(referenced={})\n"),
         )),
    Mutant(
        "event-ids-by-epoch-and-state",
        "Event ids go back to {job}:{epoch}:{state}: a workflow retry's second cancel of a "
        "step repeats the first's id, and a consumer that dedupes drops it.",
        "b9371e4 (issue 29, defect 11)",
        "tests/integration/test_event_ids.py::"
        "test_a_step_cancelled_again_after_a_workflow_retry_gets_a_new_event_id",
        (Edit(F + "events/publishing.py",
              "    changes = job.extra.get(CHANGES)\n",
              "    changes = None\n"),
         )),
    Mutant(
        "relay-retries-an-unreadable-record-forever",
        "The local relay rereads a record it cannot decode forever: no event after it goes "
        "out.",
        "a21da3a (issue 29, defect 12)",
        "tests/integration/test_stream_records.py::"
        "test_a_record_the_relay_cannot_read_is_set_aside_after_its_tries_and_the_rest_go_out",
        (Edit(F + "streams/poller.py",
              "            if count < TRIES:\n",
              "            if count < TRIES or True:\n"),
         )),
    Mutant(
        "internal-task-submittable",
        "POST /jobs accepts an internal task (leasehold.bulk) with any payload.",
        "f78168b (issue 29, defect 13)",
        "tests/integration/test_internal_tasks.py::"
        "test_an_internal_task_is_refused_at_submission_on_every_route",
        (Edit(F + "core/spec.py",
              "    if task.startswith(INTERNAL_PREFIX) and not internal:\n",
              "    if task.startswith(INTERNAL_PREFIX) and not internal and False:\n"),
         )),
    # -- the combination table's fixes (issue 29) ---------------------------------------
    Mutant(
        "re-run-keeps-its-past-deadline",
        "A job re-run by hand keeps the deadline_at of its first run: one that passed while "
        "it lay finished ends the re-run DEAD at its lease without running.",
        "438129c (issue 29, combination deadline x manual retry)",
        "tests/integration/test_combinations_flow.py::"
        "test_a_job_re_run_by_hand_gets_its_deadline_again_from_the_re_run",
        (Edit(F + "lifecycle/control.py",
              "        sets[DEADLINE] = now + int(job.extra[DEADLINE]) - job.created_at\n",
              "        sets[DEADLINE] = int(job.extra[DEADLINE])\n"),
         )),
    Mutant(
        "re-run-debounce-window-joined",
        "A debounce window re-run by hand is joined again by the next submission with its "
        "key, which replaces the payload the re-run was asked to run.",
        "a8cd429 (issue 29, combination debounce x manual retry)",
        "tests/integration/test_combinations_flow.py::"
        "test_a_debounce_window_re_run_by_hand_is_not_a_window_again",
        (Edit(F + "flow/debounce.py",
              "            or job.extra.get(DEBOUNCE_KEY) != key or job.extra.get(RERUN):\n",
              "            or job.extra.get(DEBOUNCE_KEY) != key:\n"),
         )),
    Mutant(
        "re-run-parent-skips-cancelled-children",
        "A parent re-run by hand answers its spawn with the child its first end cancelled, and "
        "succeeds without the child's work.",
        "1da7e1e (issue 29, combination spawn x manual retry)",
        "tests/integration/test_combinations_durable.py::"
        "test_a_parent_re_run_by_hand_gets_its_cancelled_children_run_again",
        (Edit(F + "durable/children.py",
              "        if not _unfinished(app, stored[sk]):\n",
              "        if True or not _unfinished(app, stored[sk]):\n"),
         )),
    # -- deadline x sweep ------------------------------------------------------------------
    Mutant(
        "sweeper-leaves-queued-past-deadline",
        "The sweeper no longer ends a job still QUEUED past its deadline: one parked on a full "
        "key stays parked, holding its live slot, until the key frees.",
        "43df5bf (issue 29, F6: deadline x sweep)",
        "tests/integration/test_combinations_flow.py::"
        "test_a_job_held_by_its_key_past_its_deadline_ends_dead_at_the_next_sweep",
        (Edit(F + "lifecycle/sweeper.py",
              "            end_past_deadline(app, job, now, ACTOR)\n",
              "            False\n"),
         )),
    Mutant(
        "queued-handoff-not-bounded-by-deadline",
        "A QUEUED row's hand-off deadline is not bounded by its deadline_at: the sweeper "
        "looks at a job held past its deadline only at the hand-off deadline (15 min).",
        "43df5bf (issue 29, F6: deadline x sweep)",
        "tests/integration/test_deadline_sweep.py::"
        "test_a_job_whose_message_was_lost_ends_dead_at_the_first_sweep_past_its_deadline",
        (Edit(F + "lifecycle/store_index.py",
              "                for bound in (start_by, deadline):\n",
              "                for bound in (start_by,):\n"),
         )),
    Mutant(
        "requeued-sweep-at-its-past-deadline",
        "A job that enters QUEUED after its deadline passed gets its past deadline as its "
        "sweep time, below the sweeper's frontier: a lost re-send strands it QUEUED for good.",
        "d56dad7 (store_index._index_keys)",
        "tests/integration/test_sweep_index.py::"
        "test_a_job_requeued_past_its_deadline_stays_where_the_sweeper_reads",
        (Edit(F + "lifecycle/store_index.py",
              "                        expires = min(int(expires), max(int(bound), now))\n",
              "                        expires = min(int(expires), int(bound))\n"),
         )),
    # -- issue 44's two defects --------------------------------------------------------
    Mutant(
        "cancelled-transaction-keeps-its-stream-record",
        "The emulator's transaction undo puts a cancelled transaction's rows back but keeps "
        "the records its writes appended to the stream: an admission refused by its stale "
        "admission item and written again under a new id is published as two Job Queued "
        "events, one for a job that never existed.",
        "4e65f17 (issue 44, the phantom event)",
        "tests/integration/test_stream_events.py::"
        "test_an_admission_refused_and_retried_under_a_new_id_is_one_job_queued_event",
        (Edit(F + "local/dynamo_transactions.py",
              "            for shard, records, length in marks.values():\n"
              "                _cut(shard, records, length)\n",
              ""),
         )),
    Mutant(
        "unkeyed-submit-span-ended-before-its-write",
        "A submission without an idempotency key reports its submit span before its row is "
        "written: an admission refused and written again under a new id leaves a submit "
        "span for a job that never existed.",
        "4e65f17 (issue 44, the phantom span)",
        "tests/integration/test_tracing.py::"
        "test_an_admission_refused_and_retried_under_a_new_id_reports_one_submit_span",
        (Edit(F + "tracing/spans.py",
              "    if row.state is JobState.WAITING:\n        span.end()\n",
              "    if row.state is JobState.WAITING or row.idempotency_key is None:\n"
              "        span.end()\n"),
         )),
    Mutant(
        "enqueued-submit-span-ended-before-the-callers-write",
        "enqueue_item reports its job's submit span as it builds the entries, before the "
        "caller's own transaction runs: a transaction its business condition refuses "
        "leaves a submit span for a job that never existed.",
        "machine2 (issue 44, the enqueued job's phantom span)",
        "tests/integration/test_tracing.py::"
        "test_an_enqueued_job_whose_callers_transaction_is_refused_reports_no_submit_span",
        (Edit(F + "tracing/spans.py",
              "    if row.extra.get(HANDOFF) == BY_STREAM:\n",
              "    if row.extra.get(HANDOFF) == BY_STREAM and False:\n"),
         )),
    Mutant(
        "patched-on-a-history-that-predates-it",
        "ctx.patched answers True where another record stands at its place (a history "
        "written by code without the patch): a run begun before the deploy takes the new "
        "branch on replay and stops as NonDeterministic.",
        "issue 36 (patches: a False answer takes no place)",
        "tests/integration/test_durable_versions.py::"
        "test_patched_keeps_old_runs_on_the_old_branch_and_new_runs_on_the_new",
        (Edit(F + "durable/history.py",
              "        if expected == sk:\n            self.position += 1\n"
              "            return True\n        return False\n",
              "        self.position += 1\n        return True\n"),
         )),
    Mutant(
        "spawn-reads-its-own-cap",
        "A worker's ctx.spawn takes the tenant's limits from its own process (the defaults "
        "of a worker deployed without the API's variables), not the runtime's settings and "
        "the tenant's plan: an admitted parent under a cap runs its children past it.",
        "60279b9 (issue 44, the tenant's cap per function)",
        "tests/integration/test_durable_children.py::"
        "test_a_tenants_plan_caps_its_admission_and_its_workers_spawns_alike",
        (Edit(F + "durable/children.py",
              "    limits = limits_for(app, parent.tenant)\n",
              "    limits = Limits()  # the worker's own environment: no variable set\n"),
         Edit(F + "durable/children.py",
              "from leasehold.tenancy.admission import slot_admitted\n",
              "from leasehold.tenancy.admission import Limits, slot_admitted\n"),
         )),
    Mutant(
        "contended-submit-try-reported-as-unknown",
        "A submission try whose transaction conflicts cancelled (nothing written, for certain) "
        "reports its submit span as an ERROR of unknown outcome; admission makes the job on "
        "another item, and two spans are reported for one job.",
        "4ea7023 (issue 44, found by the per-step span check)",
        "tests/integration/test_tracing.py::"
        "test_an_admission_contended_on_one_item_and_made_on_another_reports_one_submit_span",
        (Edit(F + "tracing/spans.py",
              "    return isinstance(exc, (Cancelled, LeaseholdError)) or (\n"
              "        isinstance(exc, ClientError) and contended(exc))\n",
              "    return isinstance(exc, (Cancelled, LeaseholdError)) or (\n"
              "        isinstance(exc, ClientError) and contended(exc) and False)\n"),
         )),
    Mutant(
        "bulk-job-on-the-first-pool",
        "A bulk job runs on the deployment's first pool even when that pool's tasks are "
        "external: only a remote worker leases there, and the bulk task never runs.",
        "117c7fb (the bulk job's pool)",
        "tests/integration/test_bulk.py::"
        "test_a_bulk_job_runs_on_the_first_python_pool_never_on_an_external_one",
        (Edit(F + "bulk/run.py",
              "    return next(iter(app.settings.python_pools()), app.settings.pools[0])\n",
              "    return app.settings.pools[0]\n"),
         )),
    Mutant(
        "retry-outcome-twice-on-one-admission-item",
        "A counted job retried after its cap was lifted, whose rate token lands on the item "
        "that counted its death, takes the outcome back in a second operation on that item "
        "in the same transaction: DynamoDB refuses it and the retry answers 500.",
        "451720c (retry admission, 1 in the tenant's shards)",
        "tests/integration/test_retry_admission.py::"
        "test_a_counted_job_retried_after_its_cap_was_lifted_moves_its_outcome_to_the_observer",
        (Edit(F + "tenancy/admission.py",
              "            if home != shard:\n"
              "                also.append(add(app.settings, slot_item(job.tenant, home), "
              "outcome))\n",
              "            also.append(add(app.settings, slot_item(job.tenant, home), outcome))\n"),
         )),
    # -- a cap without transactions (issue 46) ------------------------------------------
    Mutant(
        "slot-taken-twice-on-a-lost-response",
        "A submission's slot update carries no token of its own: botocore's retry of a try "
        "that landed (its response lost) takes a second slot for one job.",
        "issue 46 part 3 (a cap without transactions)",
        "tests/integration/test_cap_without_transactions.py::"
        "test_a_lost_response_on_the_slot_takes_it_once_below_the_cap",
        (Edit(F + "tenancy/slots.py",
              '    out["ConditionExpression"] = f"({update[\'ConditionExpression\']}) AND " \\\n'
              '        "(attribute_not_exists(#slast) OR #slast <> :stoken)"\n',
              '    out["ConditionExpression"] = f"({update[\'ConditionExpression\']}) AND " \\\n'
              '        "(attribute_not_exists(#slast) OR #slast <> :stoken OR " \\\n'
              '        "attribute_exists(#slast))"\n'),
         )),
    Mutant(
        "repair-takes-a-settling-give-back-for-an-orphan",
        "The repair counts only live rows against a bucket's slots, not jobs that ended within "
        "the settle time: a give-back still on its way lands after the repair returned the "
        "same slot, and the tenant holds one slot fewer than its live jobs (its cap passed).",
        "issue 46 part 3 (a cap without transactions)",
        "tests/integration/test_cap_without_transactions.py::"
        "test_a_give_back_still_on_its_way_is_not_taken_for_an_orphan",
        (Edit(F + "tenancy/slots.py",
              "            elif _ended(job) >= now - SETTLE_MS:\n",
              "            elif _ended(job) >= now - SETTLE_MS and False:\n"),
         )),
    Mutant(
        "repair-reads-only-the-listing-index",
        "The repair reads a bucket's rows from the sparse listing index alone: a plain capped "
        "job, listed from its home with no index entry, counts as absent, and the slot it "
        "still holds is returned (the cap passed while it runs).",
        "issue 46 parts 2 and 3 (the table keyed by home; a cap without transactions)",
        "tests/integration/test_cap_without_transactions.py::"
        "test_a_repair_keeps_the_slots_of_live_jobs_listed_from_their_home_and_from_the_index",
        (Edit(F + "tenancy/slots.py",
              "    jobs = [read[i] for i in ids if i in read]\n",
              "    jobs: list[Job] = []\n"),
         )),
    Mutant(
        "give-back-to-a-closed-bucket",
        "A give-back is not conditioned on its bucket still being open: one that lands after "
        "the repair returned its slot and closed the bucket takes a live job's slot away.",
        "issue 46 part 3 (a cap without transactions)",
        "tests/integration/test_cap_without_transactions.py::"
        "test_a_give_back_to_a_bucket_the_repair_closed_is_refused",
        (Edit(F + "tenancy/slots.py",
              '        "ConditionExpression": "#live > :zero AND attribute_exists(#in) AND "\n',
              '        "ConditionExpression": "#live > :zero AND (attribute_exists(#in) OR '
              'attribute_not_exists(#in)) AND "\n'),
         )),
    Mutant(
        "capped-job-sent-first",
        "A capped job is sent first, so its row has no sweep entry: a worker that dies holding "
        "it is noticed only when SQS's visibility timeout (300 s) brings its message back, not "
        "by the sweeper at its lease's end as the worker protocol promises (every job through "
        "the API's default cap).",
        "issue 46 part 3 (capfree3: the merged tree failed the conformance zombie/kill cases)",
        "tests/integration/test_cap_without_transactions.py::"
        "test_a_capped_job_whose_worker_died_is_taken_over_by_the_sweeper_after_its_lease",
        (Edit(F + "lifecycle/submission.py",
              "        not row.extra.get(COUNTED) and row.idempotency_key is None and \\\n",
              "        row.idempotency_key is None and \\\n"),
         )),
    Mutant(
        "remote-job-sent-first",
        "An uncapped job of an external pool is sent first: a remote worker that dies holding "
        "it is not taken over by the sweeper at its lease's end, as docs/protocol.md "
        "promises, but only when its message's visibility timeout ends.",
        "issue 46 part 3 (capfree3)",
        "tests/integration/test_remote_workers.py::test_a_zombie_gets_409_and_changes_nothing",
        (Edit(F + "lifecycle/submission.py",
              "        first = not internal and row.pool not in app.settings.external_tasks "
              "and \\\n",
              "        first = not internal and \\\n"),
         )),
    Mutant(
        "lean-give-back-skipped",
        "A capped job's slot is not given back after its terminal write: every job a "
        "tenant ever ran holds its cap, until the repair (here never, its job ended) "
        "returns it, and the tenant is refused at the cap with nothing live.",
        "issue 46 part 3 (a cap without transactions)",
        "tests/integration/test_cap_without_transactions.py::"
        "test_every_end_of_a_capped_job_gives_its_slot_back_once_and_counts_its_outcome",
        (Edit(F + "tenancy/slots.py",
              "        if source is None or not source.live or not job.state.terminal or \\\n",
              "        if True or source is None or not source.live or not job.state.terminal or "
              "\\\n"),
         )),
    Mutant(
        "lean-cap-check-dropped",
        "The admission update that takes a capped job's slot no longer checks the cap "
        "(live < cap): a tenant at its cap is admitted anyway.",
        "issue 46 part 3 (a cap without transactions)",
        "tests/integration/test_cap_without_transactions.py::"
        "test_every_end_of_a_capped_job_gives_its_slot_back_once_and_counts_its_outcome",
        (Edit(F + "tenancy/gcra.py",
              '        condition = f"{rate} AND {SLOT_FREE}"\n',
              '        condition = f"{rate} AND ({SLOT_FREE} OR attribute_exists(#live))"\n'),
         )),
    Mutant(
        "gathered-send-counts-a-refused-entry-as-sent",
        "Submissions written side by side send first together: an entry SQS refused in the "
        "gathered SendMessageBatch is taken for sent, so its row is put with no sweep entry "
        "and nothing names it: the job is never run.",
        "issue 46 (send first together: submit_many, POST /jobs/batch)",
        "tests/integration/test_submit_many.py::"
        "test_a_refused_or_lost_batch_send_makes_those_rows_the_outbox_and_each_job_runs_once",
        (Edit(F + "lifecycle/handoff.py",
              "        self._taken.update((index, hand.job.job_id in sent) "
              "for index, hand in waiting)\n",
              "        self._taken.update((index, True) for index, hand in waiting)\n"),
         )),
    # -- cells (issue 48) -----------------------------------------------------------------
    Mutant(
        "isolated-cell-still-renews-its-region-lease",
        "A cell whose Region `leasehold regions isolate` took off still reaches the control "
        "table: its Region lease is renewed and it goes on leasing, so the isolated Region "
        "is not fenced at all.",
        "issue 48 (`leasehold dev --regions`, the isolation switch)",
        "tests/integration/test_cells_isolate.py::"
        "test_a_cell_isolated_while_it_runs_stops_and_works_again_when_brought_back",
        (Edit(F + "cells/cell.py",
              "    chosen = [*parse(spec), *switched(os.environ)]\n",
              "    chosen = [*parse(spec)]\n"),
         )),
    Mutant(
        "replication-lag-alarm-without-its-receiving-region",
        "The replication-lag alarm watches ReplicationLatency by table only: DynamoDB "
        "publishes it per receiving Region, so the alarm watches a metric that never has "
        "data and never fires, however late a take-over's replica is.",
        "issue 48 (the cell alarms' replication lag)",
        "tests/infra/test_control_table.py::"
        "test_a_cell_alarms_on_each_replica_of_its_jobs_table_lagging",
        (Edit(F + "cdk/cell_alarms.py",
              '                                    dimensions_map={"TableName": jobs_table,\n'
              '                                                    "ReceivingRegion": replica}),\n',
              '                                    dimensions_map={"TableName": jobs_table}),\n'),
         )),
)


def by_name() -> dict[str, Mutant]:
    return {mutant.name: mutant for mutant in MUTANTS}
