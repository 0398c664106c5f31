"""Leasehold's packages as a user gets them (issue 47): an sdist and a wheel built from this
checkout with ``python -m build``, and a folder of every other wheel a project needs, for pip's
``--find-links`` with no index.

The Leasehold wheel is built anew for each test session (the code changes between runs); the
other wheels are built or downloaded once into
``~/.cache/leasehold/wheels/<python>-<hash of pyproject.toml>`` (changed requirements make a
new one) and never hold a Leasehold wheel, so pip can only find the fresh one.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path.home() / ".cache" / "leasehold" / "wheels"
#: What a project's requirements-dev.txt asks for besides Leasehold, and what the isolated
#: build of Leasehold's own sdist needs (its build backend).
OTHERS = ("pytest>=8", "humanize>=4,<5", "setuptools>=77")


@dataclass(frozen=True)
class Built:
    wheel: Path
    sdist: Path

    @property
    def find_links(self) -> str:
        """``PIP_FIND_LINKS``: the fresh Leasehold wheel, then the cached other wheels."""
        return " ".join([str(self.wheel.parent), str(dependency_wheels(self.wheel))])


def offline(find_links: str) -> dict[str, str]:
    """pip's environment for an install from local wheels only."""
    return {"PIP_FIND_LINKS": find_links, "PIP_NO_INDEX": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            # No bytecode compiled at install (pip's default): it took most of the
            # install's time here, and Python compiles what it imports anyway.
            "PIP_NO_COMPILE": "1"}


def requirements_hash() -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]


def cache_folder() -> Path:
    return CACHE / f"{sys.version_info.major}{sys.version_info.minor}-{requirements_hash()}"


def dependency_wheels(leasehold_wheel: Path) -> Path:
    """The folder of wheels of everything ``leasehold[cdk,local]`` and a new project need,
    Leasehold's own excepted."""
    folder = cache_folder()
    if not (folder / ".complete").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        fetched = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
             "--wheel-dir", str(folder), f"{leasehold_wheel}[cdk,local]", *OTHERS],
            capture_output=True, text=True, check=False, timeout=900,
            env={**os.environ, "PIP_FIND_LINKS": ""})
        assert fetched.returncode == 0, fetched.stderr[-3000:]
        for own in folder.glob("leasehold-*"):
            own.unlink()
        (folder / ".complete").write_text("")
    return folder


def build(outdir: Path) -> Built:
    """``python -m build``, as a user or a release does: the sdist, then the wheel built from
    that sdist (so a file the sdist leaves out is missing from the wheel too)."""
    env = {**os.environ}
    if (cache_folder() / ".complete").is_file():  # the build backend: no index needed
        env.update(offline(str(cache_folder())))
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(outdir), str(ROOT)],
                           capture_output=True, text=True, check=False, timeout=900, env=env)
    assert built.returncode == 0, (built.stdout + built.stderr)[-3000:]
    (wheel,) = outdir.glob("leasehold-*.whl")
    (sdist,) = outdir.glob("leasehold-*.tar.gz")
    return Built(wheel=wheel, sdist=sdist)
