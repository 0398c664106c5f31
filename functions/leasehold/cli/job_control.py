"""``leasehold jobs pause|resume|reset ID``: hold one job, lift the hold, or run a durable
job again from a step (issue 36). Registered in the ``jobs`` group (:mod:`.bulk`)."""

from __future__ import annotations

import argparse
from typing import Any

from leasehold.cli.client import ApiError, Client
from leasehold.cli.output import emit, fail, show_job
from leasehold.cli.parsing import command

ID = "01JABCDEF0123456789ABCDEFG"


def register(actions: Any) -> None:
    command(actions, "pause", "start nothing of the job until it is resumed (a running one "
                              "finishes its attempt; nothing is lost)",
            [f"leasehold jobs pause {ID}"], run_pause
            ).add_argument("job_id", help="the job's id")
    command(actions, "resume", "let a paused job start again",
            [f"leasehold jobs resume {ID}"], run_resume
            ).add_argument("job_id", help="the job's id")
    reset = command(actions, "reset", "run a durable job again from a step: that step's "
                                      "records and later ones are dropped, earlier steps "
                                      "keep their results",
                    [f"leasehold jobs reset {ID} --from-step charge"], run_reset)
    reset.add_argument("job_id", help="the job's id")
    reset.add_argument("--from-step", required=True,
                       help="the step (its ctx.step name) to run again from, e.g. charge")


def _act(args: argparse.Namespace, done: str) -> int:
    client = Client.from_args(args)
    try:
        if args.action == "pause":
            job = client.pause_job(args.job_id)
        elif args.action == "resume":
            job = client.resume_job(args.job_id)
        else:
            job = client.reset_job(args.job_id, args.from_step)
    except ApiError as exc:
        return fail(exc)
    emit(args, job, f"{done}\n\n{show_job(job)}")
    return 0


def run_pause(args: argparse.Namespace) -> int:
    return _act(args, f"paused {args.job_id}")


def run_resume(args: argparse.Namespace) -> int:
    return _act(args, f"resumed {args.job_id}")


def run_reset(args: argparse.Namespace) -> int:
    return _act(args, f"reset {args.job_id} from step {args.from_step!r}")
