"""``leasehold dev --reload``: when a task module's file changes, import it again in the API
(so a new task or new defaults are accepted at submit) and restart the workers (so jobs run
the new code). Changes are found by polling modification times once a second: no extra
dependency, and a handful of ``stat`` calls."""

from __future__ import annotations

import hashlib
import importlib
import logging
import site
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from leasehold.core.registry import TaskDefinition, TaskRegistry

log = logging.getLogger(__name__)


def files_of(modules: Iterable[str]) -> list[Path]:
    """The source files to watch for the task modules: every ``.py`` file under each one's
    top-level package (a helper module the tasks import is code they run), unless that
    package is installed (in site-packages or the standard library: not being edited); a
    top-level module, or an installed one, is watched alone."""
    files: set[Path] = set()
    for name in modules:
        top = sys.modules.get(name.partition(".")[0])
        folders = [Path(p) for p in getattr(top, "__path__", ())]
        if folders and not any(_installed(folder) for folder in folders):
            files.update(path for folder in folders for path in folder.rglob("*.py"))
            continue
        origin = getattr(sys.modules.get(name), "__file__", None)
        if origin is not None:
            path = Path(origin)
            files.update(path.parent.rglob("*.py") if path.name == "__init__.py" else [path])
    return sorted(files)


def source_version(modules: Iterable[str]) -> str:
    """The code version of the task modules under ``leasehold dev`` (issue 36): a hash of
    the files :func:`files_of` watches (their paths relative to their package and their
    bytes), so an edit makes a new version and undoing it gives the old one back."""
    digest = hashlib.sha256()
    for path in files_of(modules):
        try:
            data = path.read_bytes()
        except OSError:  # deleted, or being replaced by an editor
            continue
        digest.update(path.name.encode() + b"\0" + data + b"\0")
    return "dev-" + digest.hexdigest()[:12]


def _installed(folder: Path) -> bool:
    """Whether ``folder`` lies in site-packages or the standard library."""
    roots = {*site.getsitepackages(), site.getusersitepackages(),
             *(sysconfig.get_path(key) for key in ("stdlib", "platstdlib", "purelib",
                                                   "platlib"))}
    resolved = folder.resolve()
    return any(resolved.is_relative_to(Path(root).resolve()) for root in roots if root)


class Watcher:
    def __init__(self, modules: Iterable[str]) -> None:
        self.modules = tuple(modules)
        self.seen = self._stamps()

    def _stamps(self) -> dict[Path, int]:
        stamps = {}
        for path in files_of(self.modules):
            try:
                stamps[path] = path.stat().st_mtime_ns
            except OSError:  # deleted, or being replaced by an editor
                continue
        return stamps

    def changed(self) -> list[Path]:
        now = self._stamps()
        changed = sorted(p for p in now.keys() | self.seen.keys()
                         if now.get(p) != self.seen.get(p))
        self.seen = now
        return changed


def reimport(registry: TaskRegistry, modules: Iterable[str]) -> None:
    """Import the task modules again; on any error put the old tasks back and raise."""
    names = [m for m in sys.modules if any(m == t or m.startswith(t + ".") for t in modules)]
    forgotten: list[TaskDefinition] = []
    for name in modules:
        forgotten += registry.forget(name)
    try:
        for name in sorted(names, key=lambda n: -n.count(".")):  # submodules first
            importlib.reload(sys.modules[name])
    except BaseException:
        for definition in forgotten:
            registry.forget(definition.fn.__module__)
        for definition in forgotten:
            registry.register(definition)
        raise


def watch(modules: Iterable[str], registry: TaskRegistry, stopping: threading.Event,
          restart: Callable[[], int], say: Callable[[str], None], *,
          interval: float = 1.0) -> None:
    """Until ``stopping``: on a change, re-import the modules and ``restart`` the workers."""
    watcher = Watcher(modules)
    while not stopping.wait(interval):
        changed = watcher.changed()
        if not changed:
            continue
        shown = ", ".join(_short(p) for p in changed)
        try:
            reimport(registry, watcher.modules)
        except Exception as exc:
            log.debug("reload failed", exc_info=True)
            say(f"reload: {shown} changed but does not import ({type(exc).__name__}: {exc}); "
                "the workers keep the code they have")
            continue
        count = restart()
        say(f"reload: {shown} changed; restarting {count} worker(s) (running jobs finish "
            f"first) on code version {source_version(watcher.modules)}")


def _short(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
