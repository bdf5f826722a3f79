"""What made a run: the versions of the packages its decisions depend on, the commit of this
repository and the processor's arithmetic. A run's figures repeat only with the same versions
and on a processor whose vector instructions torch and the BLAS use alike: the surrogates' fits
round differently on another, and a decision that flips there changes the rest of the run. So
every ``run.json`` records them, the tables name them, and runs paired against each other
should come from one machine.
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


def processor() -> dict[str, str | None]:
    """The processor as the arithmetic sees it: ``cpu`` (its model name, None where unknown)
    and ``torch_cpu_capability`` (the vector instructions torch's kernels use, e.g. "AVX512";
    None without torch)."""
    cpu = None
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        pass
    cpu = cpu or platform.processor() or None
    try:
        import torch

        capability: str | None = str(torch.backends.cpu.get_cpu_capability())
    except (ImportError, AttributeError):
        capability = None
    return {"cpu": cpu, "torch_cpu_capability": capability}


def environment() -> dict[str, Any]:
    """What a run records: ``versions`` (:func:`package_versions`), ``processor``
    (:func:`processor`) and ``commit`` (:func:`git_commit`)."""
    return {"versions": package_versions(), "processor": processor(), "commit": git_commit()}


def versions_key(summary: Mapping[str, Any]) -> str:
    """One line naming the versions and the processor a run (its ``run.json``) was made with;
    "not recorded" for runs written before runs recorded them."""
    versions = summary.get("versions")
    if not versions:
        return "not recorded"
    key = ", ".join(f"{name} {version}" for name, version in versions.items() if version is not None)
    cpu = summary.get("processor") or {}
    named = [v for v in (cpu.get("cpu"), cpu.get("torch_cpu_capability")) if v]
    return key + (f"; processor {' '.join(named)}" if named else "")


def versions_text(keys: Iterable[str]) -> str:
    """The versions of a set of runs, each given by its :func:`versions_key`: one line when all
    runs share them, else each set with the number of its runs (most runs first)."""
    counts = Counter(keys)
    if not counts:
        return "no runs"
    if len(counts) == 1:
        return next(iter(counts))
    return "; ".join(f"{key} ({n} runs)" for key, n in counts.most_common())
