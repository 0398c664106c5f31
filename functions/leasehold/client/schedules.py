"""The client's schedule calls: create, read, change, pause, resume, trigger and delete a
schedule, and its next fire times (``leasehold schedules`` and the console make the same
calls)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leasehold.client.errors import ApiError
from leasehold.client.operations import segment, task_name


class ScheduleOperations:
    """Mixed into :class:`~leasehold.client.Client`; every call is one request."""

    def request(self, method: str, path: str, body: Any = None,
                query: Mapping[str, Any] | None = None, *, repeatable: bool | None = None,
                wait: float = 0.0) -> Any:
        raise NotImplementedError

    def create_schedule(self, **fields: Any) -> dict[str, Any]:
        """``POST /schedules``: ``cron`` and ``task`` (plus the job fields) or ``workflow``."""
        if "task" in fields and not isinstance(fields["task"], str):
            fields["task"] = task_name(fields["task"])
        schedule: dict[str, Any] = self.request("POST", "/schedules", fields)
        return schedule

    def get_schedule(self, schedule_id: str) -> dict[str, Any]:
        schedule: dict[str, Any] = self.request("GET", f"/schedules/{segment(schedule_id)}")
        return schedule

    def list_schedules(self, *, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
        page: dict[str, Any] = self.request("GET", "/schedules",
                                            query={"limit": limit, "cursor": cursor})
        return page

    def update_schedule(self, schedule_id: str, **changes: Any) -> dict[str, Any]:
        schedule: dict[str, Any] = self.request("PATCH", f"/schedules/{segment(schedule_id)}",
                                                changes, repeatable=True)
        return schedule

    def pause_schedule(self, schedule_id: str) -> dict[str, Any]:
        return self._schedule_action(schedule_id, "pause")

    def resume_schedule(self, schedule_id: str) -> dict[str, Any]:
        return self._schedule_action(schedule_id, "resume")

    def trigger_schedule(self, schedule_id: str) -> dict[str, Any]:
        """Run the schedule's job (or workflow) now, once."""
        return self._schedule_action(schedule_id, "trigger")

    def next_fire_times(self, schedule_id: str, count: int = 5) -> dict[str, Any]:
        times: dict[str, Any] = self.request("GET", f"/schedules/{segment(schedule_id)}/next",
                                             query={"count": count})
        return times

    def delete_schedule(self, schedule_id: str) -> None:
        try:
            self.request("DELETE", f"/schedules/{segment(schedule_id)}")
        except ApiError as exc:
            # Sent again after a try whose answer was lost: that try deleted it.
            if not (exc.repeated and exc.status == 404):
                raise

    def _schedule_action(self, schedule_id: str, action: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.request("POST",
                                              f"/schedules/{segment(schedule_id)}/{action}")
        return answer
