"""Cells with a home Region: ``regions show``, ``regions failover``, ``regions failback``
(``leasehold cells ...`` is the same group under its first name).

These talk to the control table (the MRSC global table) directly with the operator's AWS
credentials, not to a cell's API: the cell being failed over may be the one that is gone.
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
    _control_options(over)
    back = command(cells, "failback", "let a Region's cell work again and move back the "
                   "tenants a failover took from it",
                   ["leasehold regions failback --region us-east-1"], run_failback,
                   client=False)
    back.add_argument("--region", required=True,
                      help="the Region to bring back, e.g. us-east-1")
    _tenants(back)
    _control_options(back)


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


def _control(args: argparse.Namespace) -> ControlTable:
    from leasehold.cells.cell import control_client
    from leasehold.cells.control import ControlTable

    if not args.control_table:
        raise LeaseholdError("name the control table: --control-table or "
                             "$LEASEHOLD_CONTROL_TABLE")
    settings = Settings.from_env()
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
        regions = sorted({home.region for home in homes} | {home.origin for home in homes
                                                              if home.origin})
        records = [control.region(region) for region in regions]
    except Exception as exc:  # an operator's command: say what went wrong, briefly
        return _fail(exc)
    data = {"regions": [{"region": r.region, "epoch": r.epoch, "state": r.state.value,
                         "lease_until": r.lease_until, "url": r.url}
                        for r in records if r is not None],
            "homes": [{"tenant": h.tenant, "home": h.region, "epoch": h.epoch,
                       "moved_from": h.origin or None} for h in homes]}
    lines = [f"{r['region']}: {r['state']} epoch {r['epoch']} lease until {r['lease_until']}"
             for r in data["regions"]]
    lines += [f"{h['tenant']}: {h['home']} (epoch {h['epoch']})" for h in data["homes"]]
    _print(args, data, "\n".join(lines) or "no cells yet")
    return 0


def run_failover(args: argparse.Namespace) -> int:
    from leasehold.cells.failover import failover

    try:
        done = failover(_control(args), source=args.source, to=args.to,
                        now=SystemClock().now_ms(), tenants=args.tenants)
    except Exception as exc:
        return _fail(exc)
    data = {"fenced": done.fenced.region, "epoch": done.fenced.epoch,
            "stopped_by": done.stopped_by,
            "moved": [{"tenant": h.tenant, "home": h.region, "epoch": h.epoch}
                      for h in done.moved]}
    _print(args, data, f"{done.fenced.region} fenced at epoch {done.fenced.epoch}; "
                       f"{len(done.moved)} tenant(s) now homed in {args.to}; jobs acknowledged "
                       f"in {done.fenced.region} wait for it")
    return 0


def run_failback(args: argparse.Namespace) -> int:
    from leasehold.cells.failover import failback

    try:
        record, moved = failback(_control(args), region=args.region,
                                 now=SystemClock().now_ms(), tenants=args.tenants)
    except Exception as exc:
        return _fail(exc)
    data = {"region": record.region, "epoch": record.epoch,
            "moved": [{"tenant": h.tenant, "home": h.region, "epoch": h.epoch} for h in moved]}
    _print(args, data, f"{record.region} active again (epoch {record.epoch}); "
                       f"{len(moved)} tenant(s) homed there again")
    return 0
