"""Cells with a home Region: ``regions show``, ``regions failover``, ``regions failback``
(``leasehold cells ...`` is the same group under its first name), and, for a drill on
``leasehold dev --regions``, ``regions isolate`` and ``regions reconnect``.

These talk to the control table (the MRSC global table) directly with the operator's AWS
credentials, not to a cell's API: the cell being failed over may be the one that is gone.
With no control table named they use the one of the ``leasehold dev --regions`` running on
``--state-dir`` (its ``regions.json``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from leasehold.cli.output import emit
from leasehold.cli.parsing import command, group
from leasehold.clock import SystemClock
from leasehold.errors import LeaseholdError
from leasehold.settings import Settings

if TYPE_CHECKING:  # the commands import boto3 when they run, not when the CLI starts
    from leasehold.cells.control import ControlTable


def register(subparsers: Any) -> None:
    cells = group(subparsers, "regions", "Regions: tenants' homes, Region leases, failover "
                  "(also named 'cells')",
                  ["leasehold regions show",
                   "leasehold regions failover --from us-east-1 --to us-east-2"],
                  aliases=["cells"])
    show = command(cells, "show", "each Region's lease and each tenant's home",
                   ["leasehold regions show", "leasehold regions show --json"], run_show,
                   client=False)
    _control_options(show)
    over = command(cells, "failover", "fence a Region and re-home its tenants to another "
                   "(their acknowledged jobs wait for it)",
                   ["leasehold regions failover --from us-east-1 --to us-east-2",
                    "leasehold regions failover --from us-east-1 --to us-east-2 --tenant acme"],
                   run_failover, client=False)
    over.add_argument("--from", dest="source", required=True,
                      help="the Region to leave, e.g. us-east-1")
    over.add_argument("--to", required=True, help="the tenants' new home, e.g. us-east-2")
    _tenants(over)
    over.add_argument("--take-over", action="store_true",
                      help="also re-create the old Region's unfinished jobs in the new home "
                           "(this process's LEASEHOLD_* settings are the new home's cell) from "
                           "a replica of its jobs table: at-least-once, each job that may run "
                           "twice reported, e.g. --take-over --jobs-table leasehold-jobs-use1")
    over.add_argument("--jobs-table",
                      help="with --take-over: the old Region's jobs table, read in "
                           "--replica-region, e.g. leasehold-jobs-use1")
    over.add_argument("--replica-region",
                      help="with --take-over: where the jobs table's replica is read "
                           "(default --to), e.g. us-east-2")
    _control_options(over)
    back = command(cells, "failback", "let a Region's cell work again and move back the "
                   "tenants a failover took from it",
                   ["leasehold regions failback --region us-east-1"], run_failback,
                   client=False)
    back.add_argument("--region", required=True,
                      help="the Region to bring back, e.g. us-east-1")
    _tenants(back)
    back.add_argument("--taken-table",
                      help="after a --take-over: the new home's jobs table; the jobs taken "
                           "over are cancelled in the Region brought back (this process's "
                           "LEASEHOLD_* settings are its cell) before it works again, and "
                           "those it had run reported, e.g. leasehold-jobs-use2")
    back.add_argument("--taken-region",
                      help="where --taken-table is read, e.g. us-east-2")
    _control_options(back)
    isolate = command(cells, "isolate", "take a Region of `leasehold dev --regions` off while "
                      "it runs: every AWS call of its cell fails (or hangs), its API answers "
                      "503", ["leasehold regions isolate a", "leasehold regions isolate a --hang"],
                      run_isolate, client=False)
    isolate.add_argument("region", help="the Region to take off, e.g. a")
    isolate.add_argument("--hang", action="store_true",
                         help="its calls hang instead of failing, e.g. --hang")
    _state_dir(isolate)
    reconnect = command(cells, "reconnect", "bring back a Region `leasehold regions isolate` "
                        "took off (then `failback` lets its cell work again, if it was "
                        "failed over)", ["leasehold regions reconnect a"], run_reconnect,
                        client=False)
    reconnect.add_argument("region", help="the Region to bring back, e.g. a")
    _state_dir(reconnect)


def _state_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", default=os.environ.get("LEASEHOLD_STATE_DIR",
                                                              ".leasehold"),
                        help="the state dir of the `leasehold dev --regions` to act on "
                             "(default .leasehold, or $LEASEHOLD_STATE_DIR), e.g. "
                             "--state-dir /tmp/lh")


def _tenants(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", action="append", default=[], dest="tenants",
                        help="only this tenant (repeat for more), e.g. acme")


def _control_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--control-table", default=os.environ.get("LEASEHOLD_CONTROL_TABLE"),
                        help="the control table's name (default $LEASEHOLD_CONTROL_TABLE), "
                             "e.g. leasehold-control")
    parser.add_argument("--control-region", default=os.environ.get("LEASEHOLD_CONTROL_REGION"),
                        help="a Region of the control table's replicas (default "
                             "$LEASEHOLD_CONTROL_REGION, else $AWS_REGION), e.g. us-east-2")
    parser.add_argument("--json", action="store_true", help="print JSON")
    _state_dir(parser)


def _control(args: argparse.Namespace) -> ControlTable:
    from leasehold.cells.cell import control_client
    from leasehold.cells.control import ControlTable

    settings = Settings.from_env()
    if not args.control_table:
        from leasehold.cells.drill import RegionsUnavailable, layout

        try:
            local = layout(args.state_dir)
        except RegionsUnavailable as exc:
            raise LeaseholdError(f"name the control table (--control-table or "
                                 f"$LEASEHOLD_CONTROL_TABLE), or run `leasehold dev --regions` "
                                 f"({exc})") from None
        # The local drill's control table, on its own emulator (which takes any key).
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            os.environ.setdefault(name, "leasehold-local")
        settings = settings.with_(control_endpoint=local.control_endpoint)
        args.control_table = local.control_table
    if args.control_region:
        settings = settings.with_(control_region=args.control_region)
    return ControlTable(control_client(settings), args.control_table)


def _print(args: argparse.Namespace, data: Any, text: str) -> None:
    emit(args, data, text)


def _fail(exc: Exception) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return 1


def run_show(args: argparse.Namespace) -> int:
    try:
        control = _control(args)
        homes = list(control.homes())
        # Every Region with a cell, a tenant homed there or none (a new cell, or one whose
        # tenants a failover took away).
        records = sorted(control.regions(), key=lambda record: record.region)
    except Exception as exc:  # an operator's command: say what went wrong, briefly
        return _fail(exc)
    data = {"regions": [{"region": r.region, "epoch": r.epoch, "state": r.state.value,
                         "lease_until": r.lease_until, "url": r.url}
                        for r in records],
            "homes": [{"tenant": h.tenant, "home": h.region, "epoch": h.epoch,
                       "moved_from": h.origin or None} for h in homes]}
    lines = [f"{r['region']}: {r['state']} epoch {r['epoch']} lease until {r['lease_until']}"
             for r in data["regions"]]
    lines += [f"{h['tenant']}: {h['home']} (epoch {h['epoch']})" for h in data["homes"]]
    _print(args, data, "\n".join(lines) or "no cells yet")
    return 0


def _scan(table: str, region: str | None) -> list[dict[str, Any]]:
    """Every item of ``table`` (a jobs table or its replica), plain."""
    import boto3

    from leasehold.aws.dynamo import from_av

    settings = Settings.from_env()
    client = boto3.session.Session().client("dynamodb", region_name=region or settings.region,
                                            endpoint_url=settings.endpoint_url)
    pages = client.get_paginator("scan").paginate(TableName=table)
    return [from_av(item) for page in pages for item in page.get("Items", [])]


def run_failover(args: argparse.Namespace) -> int:
    from leasehold.cells.failover import failover

    if args.take_over and not args.jobs_table:
        return _fail(LeaseholdError("--take-over reads the old Region's jobs table: name it "
                                    "with --jobs-table"))
    try:
        done = failover(_control(args), source=args.source, to=args.to,
                        now=SystemClock().now_ms(), tenants=args.tenants)
    except Exception as exc:
        return _fail(exc)
    data: dict[str, Any] = {
        "fenced": done.fenced.region, "epoch": done.fenced.epoch,
        "stopped_by": done.stopped_by,
        "moved": [{"tenant": h.tenant, "home": h.region, "epoch": h.epoch}
                  for h in done.moved]}
    text = (f"{done.fenced.region} fenced at epoch {done.fenced.epoch}; {len(done.moved)} "
            f"tenant(s) now homed in {args.to}; jobs acknowledged in {done.fenced.region} "
            + ("taken over as below" if args.take_over else "wait for it"))
    if args.take_over:
        from leasehold.cells.takeover import take_over
        from leasehold.compose import compose

        try:
            taken = take_over(compose(), _scan(args.jobs_table, args.replica_region or args.to),
                              source=args.source, tenants=[h.tenant for h in done.moved])
        except Exception as exc:
            return _fail(exc)
        data["taken"] = [{"job_id": t.source_id, "new_job_id": t.job_id,
                          "may_have_run": t.may_have_run} for t in taken.taken]
        data["may_have_run"] = taken.may_have_run
        data["left"] = taken.left
        text += (f"\n{len(taken.taken)} job(s) re-created in {args.to}; may have run in "
                 f"{args.source} too: {', '.join(taken.may_have_run) or 'none seen'}; "
                 f"{len(taken.left)} left to wait for it")
    _print(args, data, text)
    return 0


def run_failback(args: argparse.Namespace) -> int:
    from leasehold.cells.failover import failback

    duplicates: list[str] | None = None
    try:
        if args.taken_table:
            # Before the Region's cell may work again: its copies of what was taken over go.
            from leasehold.cells.takeover import retire, taken_from
            from leasehold.compose import compose

            taken = taken_from(_scan(args.taken_table, args.taken_region), args.region)
            duplicates = retire(compose(), taken)
        record, moved = failback(_control(args), region=args.region,
                                 now=SystemClock().now_ms(), tenants=args.tenants)
    except Exception as exc:
        return _fail(exc)
    data: dict[str, Any] = {
        "region": record.region, "epoch": record.epoch,
        "moved": [{"tenant": h.tenant, "home": h.region, "epoch": h.epoch} for h in moved]}
    text = (f"{record.region} active again (epoch {record.epoch}); "
            f"{len(moved)} tenant(s) homed there again")
    if duplicates is not None:
        data["duplicates"] = duplicates
        text += (f"; taken over and also run in {record.region}: "
                 f"{', '.join(duplicates) or 'none'}")
    _print(args, data, text)
    return 0


def run_isolate(args: argparse.Namespace) -> int:
    from leasehold.cells.drill import layout

    try:
        local = layout(args.state_dir)
        local.switch(args.region).set("hang" if args.hang else "fail")
    except LeaseholdError as exc:
        return _fail(exc)
    print(f"{args.region} isolated: every AWS call of its cell (API, workers, sweeper, "
          f"ticker, control table) {'hangs' if args.hang else 'fails'}, and its API at "
          f"{local.urls[args.region]} answers 503. Declare the failover with `leasehold "
          f"regions failover --from {args.region} --to ...`; `leasehold regions reconnect "
          f"{args.region}` brings it back.")
    return 0


def run_reconnect(args: argparse.Namespace) -> int:
    from leasehold.cells.drill import layout

    try:
        was = layout(args.state_dir).switch(args.region).clear()
    except LeaseholdError as exc:
        return _fail(exc)
    print(f"{args.region} reconnected" if was else f"{args.region} was not isolated")
    return 0
