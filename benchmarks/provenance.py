"""What made a run: the versions of the packages its decisions depend on and the commit of this
repository. A run's figures repeat only with the same versions (the surrogates' fits and the
random streams of their libraries change between releases), so every ``run.json`` records them
and the tables name them.
"""

from __future__ import annotations

import platform
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

#: the distributions whose versions a run records (the schedulers' and the lab's)
PACKAGES = ("syne-dyhpo", "syne-tune", "torch", "gpytorch", "linear_operator", "numpy", "scipy", "pandas")
#: the repository's root (its git commit is recorded when it is a git checkout)
REPOSITORY = Path(__file__).resolve().parent.parent


def package_versions(packages: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution (None: not installed), and Python's."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit(repository: Path = REPOSITORY) -> str | None:
    """The checked-out commit of ``repository``, with ``+changes`` when its tracked files
    differ from it (None: not a git checkout, or git is missing)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repository, capture_output=True, text=True,
                              check=True, timeout=10).stdout.strip()
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repository,
                                 capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+changes" if changed else "") if head else None


def environment() -> dict[str, Any]:
    """What a run records: ``versions`` (:func:`package_versions`) and ``commit`` (:func:`git_commit`)."""
    return {"versions": package_versions(), "commit": git_commit()}


def versions_key(summary: Mapping[str, Any]) -> str:
    """One line naming the versions a run (its ``run.json``) was made with; "not recorded" for
    runs written before runs recorded them."""
    versions = summary.get("versions")
    if not versions:
        return "not recorded"
    return ", ".join(f"{name} {version}" for name, version in versions.items() if version is not None)


def versions_text(keys: Iterable[str]) -> str:
    """The versions of a set of runs, each given by its :func:`versions_key`: one line when all
    runs share them, else each set with the number of its runs (most runs first)."""
    counts = Counter(keys)
    if not counts:
        return "no runs"
    if len(counts) == 1:
        return next(iter(counts))
    return "; ".join(f"{key} ({n} runs)" for key, n in counts.most_common())
