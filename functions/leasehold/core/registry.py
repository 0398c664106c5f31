"""The task registry: ``@task("name", ...)`` binds a name to a handler and its defaults."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from leasehold.core.policy import RetryPolicy
from leasehold.core.schemas import check_model
from leasehold.errors import LeaseholdError, ValidationError

Handler = Callable[[Any, Any], Any]
#: ``submit(task_name, payload, **options)``: what ``send_email.submit(...)`` calls.
Submitter = Callable[..., Any]
#: Installed by :mod:`leasehold.client` when it is imported. Core never imports the client
#: (it sits above core and speaks HTTP): the client hands core its submit function instead.
_submitters: list[Submitter] = []
#: Leasehold's own tasks (``leasehold.bulk``): only Leasehold submits them, each from the
#: route that builds its payload; every other way a job is made refuses them
#: (``core.spec.check_internal``), and ``@task`` refuses the names.
INTERNAL_PREFIX = "leasehold."


def install_submitter(submit: Submitter) -> None:
    """Make ``task.submit(...)`` call ``submit`` (the client's default, or a test's)."""
    _submitters[:] = [submit]


def _submit(name: str, payload: Any = None, **options: Any) -> Any:
    if not _submitters:
        raise LeaseholdError(f"{name}.submit() needs the client: `import leasehold.client` "
                             "first (it submits to $LEASEHOLD_URL)")
    return _submitters[0](name, payload, **options)


def _with_submit(name: str, fn: Handler) -> None:
    """``fn.submit(payload, **options)`` submits a job of task ``name``; ``fn.task_name``
    names it. The function itself is returned unchanged, so it is still called directly."""
    try:
        fn.task_name = name  # type: ignore[attr-defined]
        fn.submit = functools.partial(_submit, name)  # type: ignore[attr-defined]
    except AttributeError:  # a callable that takes no attributes: no sugar, still a task
        pass


@dataclass(frozen=True, kw_only=True)
class TaskDefinition:
    name: str
    fn: Handler
    pool: str = "default"
    priority: str = "normal"
    timeout_seconds: float = 300.0
    max_attempts: int = 5
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    #: A tighter payload limit than the API's, checked at submit: a task whose result grows
    #: with its payload (``echo``) sets the result limit here, so a payload that would fail
    #: the job after it ran is refused before it is queued.
    max_payload_bytes: int | None = None
    #: Keyed flow control defaults (leasehold.flow); a key may be a template over the
    #: payload, e.g. ``{"key": "import:{payload.file}"}``.
    unique: Mapping[str, Any] | None = None
    debounce: Mapping[str, Any] | None = None
    start_within_seconds: float | None = None
    #: Keyed flow control defaults (``{"key": "stripe:{payload.account_id}", "limit": 2}``):
    #: a job's own value wins; key templates are rendered over each job's payload at submit.
    concurrency: Any = None
    throttle: Any = None
    #: Typed tasks (``leasehold.core.schemas``): a pydantic model the payload must fit at
    #: every submission, and that the handler receives as an instance; and one the result
    #: must fit at the finish. None: any JSON, as before.
    input: type | None = None
    output: type | None = None


@dataclass(frozen=True, kw_only=True)
class TargetKind:
    """A kind of job with no code (``target: {"http": {...}}``): the built-in task that runs
    it, and how a target of the kind becomes that task's payload at submit.

    ``prepare(value, tenant)`` validates the target's value as the submitting tenant may send
    it (a ValidationError names the field as ``target.<kind>.<field>``) and answers
    ``(payload, defaults)``: the payload the task runs on, and the job's defaults the target
    implies (``concurrency``, ``throttle``, ``timeout_seconds``), which the job's own values
    override. A feature registers its kinds
    (``leasehold.targets``); core never imports it.
    """

    task: str
    prepare: Callable[[Any, str], tuple[Any, Mapping[str, Any]]]
    #: The pools a job of the kind may name (empty: any); another is refused at submit.
    pools: tuple[str, ...] = ()


class TaskRegistry:
    def __init__(self) -> None:
        self._tasks: dict[str, TaskDefinition] = {}
        #: Jobs with no code by kind (``http``, ``aws``): :class:`TargetKind`.
        self.targets: dict[str, TargetKind] = {}

    def register(self, definition: TaskDefinition) -> None:
        existing = self._tasks.get(definition.name)
        if existing is not None and existing.fn is not definition.fn:
            raise ValidationError("task", f"{definition.name!r} is registered twice")
        self._tasks[definition.name] = definition

    def get(self, name: str) -> TaskDefinition:
        try:
            return self._tasks[name]
        except KeyError:
            raise ValidationError("task", f"unknown task {name!r}") from None

    def forget(self, module: str) -> list[TaskDefinition]:
        """Unregister the tasks defined in ``module`` (or its submodules), so it can be
        imported again (``leasehold dev --reload``); returns them, to restore on failure."""
        gone = [d for d in self._tasks.values()
                if d.fn.__module__ == module or d.fn.__module__.startswith(module + ".")]
        for definition in gone:
            del self._tasks[definition.name]
        return gone

    def __contains__(self, name: object) -> bool:
        return name in self._tasks

    def names(self) -> list[str]:
        return sorted(self._tasks)

    def task(self, name: str, **defaults: Any) -> Callable[[Handler], Handler]:
        if name.startswith(INTERNAL_PREFIX):
            raise ValidationError("task", f"{name!r}: names starting with {INTERNAL_PREFIX!r} "
                                          "are Leasehold's own tasks; choose another")

        for option in ("input", "output"):
            check_model(option, defaults.get(option))

        def decorate(fn: Handler) -> Handler:
            self.register(TaskDefinition(name=name, fn=fn, **defaults))
            _with_submit(name, fn)
            return fn

        return decorate


#: The registry ``@task`` fills and the runtimes read unless given another.
default_registry = TaskRegistry()


def task(name: str, **defaults: Any) -> Callable[[Handler], Handler]:
    """Register a function as the handler of task ``name``.

    ``defaults`` are per-task defaults a submission may override: ``pool``, ``priority``,
    ``timeout_seconds``, ``max_attempts`` and ``retry`` (a :class:`RetryPolicy`); and
    ``max_payload_bytes``, a payload limit below the API's checked at submit; and flow
    control: ``unique={"key": ...}``, ``debounce={"key": ..., "seconds": ...,
    "max_wait_seconds": ...}``, ``start_within_seconds`` (keys may be templates over the
    payload, such as ``"sync:{payload.account_id}"``); and typed input and output:
    ``input=`` and ``output=``, pydantic models (see :mod:`leasehold.core.schemas`).
    The handler is called as ``fn(payload, ctx)`` with a
    :class:`~leasehold.core.context.JobContext`; with ``input=`` the payload is an instance
    of that model.
    """
    return default_registry.task(name, **defaults)


def load_modules(modules: Iterable[str]) -> None:
    """Import task modules so that their ``@task`` decorators run."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ValidationError("tasks", f"cannot import task module {module!r}: {exc}") from exc
