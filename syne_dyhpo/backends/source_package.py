"""
The ``sourcedir.tar.gz`` a SageMaker framework container unpacks into
``/opt/ml/code`` before it runs the entry point, built like the SageMaker SDK builds
it: the source folder (or only the entry point), each dependency folder at the root
under its own name (so ``import <name>`` works next to the script), and a
``requirements.txt`` that the container pip-installs first.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable
from pathlib import Path

_SKIPPED_DIRS = {"__pycache__", ".git", ".venv", ".pytest_cache", ".mypy_cache"}
_SKIPPED_SUFFIXES = (".pyc", ".pyo")


def _skipped(path: Path, root: Path) -> bool:
    parts = path.relative_to(root).parts
    return any(p in _SKIPPED_DIRS for p in parts) or path.name.endswith(_SKIPPED_SUFFIXES)


def check_sources(entry_point: str | Path, source_dir: str | Path | None, dependencies: Iterable[str | Path]) -> Path:
    """
    :param entry_point: Script to run; relative to ``source_dir`` if that is given
    :param source_dir: Folder to ship with the script, or None
    :param dependencies: Folders (or files) copied to the archive's root
    :return: Path of the entry point on this machine
    :raises ValueError: naming the argument that points to nothing
    """
    if source_dir is not None:
        if not Path(source_dir).is_dir():
            raise ValueError(f"source_dir must be an existing folder, got {str(source_dir)!r}")
        script = Path(source_dir) / entry_point
        if Path(entry_point).is_absolute() or not script.is_file():
            raise ValueError(
                f"entry_point must be a file inside source_dir={str(source_dir)!r} (a relative path), "
                f"got {str(entry_point)!r}"
            )
    else:
        script = Path(entry_point)
        if not script.is_file():
            raise ValueError(f"entry_point must be an existing file, got {str(entry_point)!r}")
    for dep in dependencies:
        if not Path(dep).exists():
            raise ValueError(f"dependencies entry {str(dep)!r} does not exist")
    return script


def build_source_archive(
    entry_point: str | Path,
    source_dir: str | Path | None = None,
    dependencies: Iterable[str | Path] = (),
    requirements: Iterable[str] = (),
) -> bytes:
    """
    :param entry_point: See :func:`check_sources`
    :param source_dir: See :func:`check_sources`
    :param dependencies: See :func:`check_sources`; ``__pycache__`` folders and
        compiled files are left out
    :param requirements: pip requirement lines. Written to ``requirements.txt`` at the
        root, after the lines of the source folder's own ``requirements.txt`` if it has one
    :return: Content of ``sourcedir.tar.gz``
    """
    dependencies = list(dependencies)
    script = check_sources(entry_point, source_dir, dependencies)
    requirements = [str(r).strip() for r in requirements if str(r).strip()]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        names: set[str] = set()

        def add(path: Path, arcname: str) -> None:
            if arcname in names:
                raise ValueError(f"two files would be shipped as {arcname!r}; rename one of the dependencies")
            names.add(arcname)
            tar.add(str(path), arcname=arcname, recursive=False)

        def add_tree(root: Path, prefix: str) -> None:
            if root.is_file():
                add(root, prefix or root.name)
                return
            for path in sorted(root.rglob("*")):
                if path.is_file() and not _skipped(path, root):
                    rel = path.relative_to(root).as_posix()
                    if prefix == "" and rel == "requirements.txt" and requirements:
                        continue  # merged below
                    add(path, f"{prefix}/{rel}" if prefix else rel)

        if source_dir is not None:
            add_tree(Path(source_dir), "")
        else:
            add(script, script.name)
        for dep in dependencies:
            dep = Path(dep).resolve()
            add_tree(dep, dep.name)
        if requirements:
            own = Path(source_dir) / "requirements.txt" if source_dir is not None else None
            lines = own.read_text().splitlines() if own is not None and own.is_file() else []
            data = ("\n".join(lines + requirements) + "\n").encode()
            info = tarfile.TarInfo("requirements.txt")
            info.size = len(data)
            info.mode = 0o644
            if "requirements.txt" in names:
                raise ValueError("requirements.txt is shipped twice (a dependency named requirements.txt?)")
            names.add("requirements.txt")
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
