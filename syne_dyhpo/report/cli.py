"""The report command: ``syne-dyhpo report PATH`` (or ``python -m syne_dyhpo.report PATH``).

PATH is a Syne Tune or Ray Tune experiment folder, or a tuner name under Syne Tune's experiment
root (``$SYNETUNE_FOLDER``, else ``~/syne-tune``), of a finished run or one still running. It
prints the model to take home and a summary, and writes ``report.txt``, ``timeline.png`` and
``curves.png`` into ``PATH/report`` (``--out`` elsewhere). The pictures need matplotlib (the
extra ``syne-dyhpo[report]``); without it the text is printed and written alone. A PATH or
``--out`` that cannot be used is said in a message naming it (exit status 2); what could not be
read in the folder is said in warning lines of the report.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from syne_dyhpo.report.loading import ReportInputError, Run, load_run
from syne_dyhpo.report.summary import (
    Summary,
    TakeHome,
    TrialHistory,
    report_text,
    summarise,
    take_home,
    trial_histories,
)

REPORT_EXTRA = "pip install 'syne-dyhpo[report]'"


@dataclass
class Report:
    """What :func:`make_report` read and wrote.

    :param timeline: the timeline PNG (None: no pictures)
    :param curves: the learning-curves PNG (None: no pictures)
    :param no_pictures: why there are no pictures (None: there are)
    """

    run: Run
    histories: dict[int, TrialHistory]
    summary: Summary
    take_home: TakeHome
    lines: list[str]
    text_path: Path
    timeline: Path | None
    curves: Path | None
    no_pictures: str | None = None

    def paths_lines(self) -> list[str]:
        """Where the report's files are, one line each."""
        lines = [f"Report: {self.text_path}"]
        if self.timeline is not None:
            lines += [f"Timeline: {self.timeline}", f"Learning curves: {self.curves}"]
        else:
            lines.append(f"No pictures: {self.no_pictures}")
        return lines


def make_report(path_or_name: str | Path, out: str | Path | None = None, pictures: bool = True,
                n_workers: int | None = None) -> Report:
    """Reads the run, writes the report's files (see the module docstring).

    :param path_or_name: experiment folder or tuner name
    :param out: folder of the report's files. Defaults to ``<experiment folder>/report``
    :param pictures: draw the PNGs (if matplotlib is installed)
    :param n_workers: the number of workers of the run, where the folder does not say
    :raises ReportInputError: naming the path that is no experiment folder, or ``out`` if it is
        no folder that can be written to
    """
    run = load_run(path_or_name)
    if n_workers is not None:
        run.n_workers = n_workers
    histories = trial_histories(run)
    summary = summarise(run, histories)
    home = take_home(run, histories)
    lines = report_text(run, summary, home)
    folder = _out_folder(Path(out).expanduser() if out is not None else run.path / "report", out is not None)
    timeline = curves = None
    no_pictures = None
    if not pictures:
        no_pictures = "not asked for (--no-pictures)"
    elif not _has_matplotlib():
        no_pictures = f"they need matplotlib ({REPORT_EXTRA})"
    else:
        from syne_dyhpo.report.curves import plot_curves
        from syne_dyhpo.report.timeline import plot_timeline

        timeline = plot_timeline(run, histories, home, folder / "timeline.png")
        curves = plot_curves(run, histories, home, folder / "curves.png")
    text_path = folder / "report.txt"
    report = Report(run, histories, summary, home, lines, text_path, timeline, curves, no_pictures)
    try:
        text_path.write_text("\n".join(lines + [""] + report.paths_lines()) + "\n")
    except OSError as err:
        raise ReportInputError(f"cannot write the report into {str(folder)!r}: {err.strerror or err}") from err
    return report


def _out_folder(folder: Path, given: bool) -> Path:
    """``folder``, made if it is not there.

    :param given: the user named it (``--out``)
    :raises ReportInputError: if it is a file, under a file, or cannot be made
    """
    name = f"--out {str(folder)!r}" if given else f"the report folder {str(folder)!r}"
    if folder.exists() and not folder.is_dir():
        raise ReportInputError(f"{name} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ReportInputError(f"{name} cannot be made: {err.strerror or err}") from err
    return folder


def _has_matplotlib() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="syne-dyhpo report", description=__doc__.split("\n\n")[0])
    p.add_argument("path", help="Syne Tune or Ray Tune experiment folder, or tuner name under $SYNETUNE_FOLDER "
                   "(~/syne-tune)")
    p.add_argument("--out", default=None, help="folder of the report's files (default: PATH/report)")
    p.add_argument("--no-pictures", action="store_true", help="text only")
    p.add_argument("--n-workers", type=_positive_int, default=None,
                   help="the run's number of workers, where the folder does not say (for the share of worker "
                        "time taken by job starts)")
    return p


def main(argv: list[str] | None = None) -> int:
    """``syne-dyhpo report PATH`` (also ``syne-dyhpo PATH``); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["report"]:
        argv = argv[1:]
    args = build_parser().parse_args(argv)
    try:
        report = make_report(args.path, args.out, pictures=not args.no_pictures, n_workers=args.n_workers)
    except (ReportInputError, FileNotFoundError) as err:
        print(f"syne-dyhpo report: {err}", file=sys.stderr)
        return 2
    print("\n".join(report.lines + [""] + report.paths_lines()))
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value
