"""The report command: ``syne-dyhpo report PATH`` (or ``python -m syne_dyhpo.report PATH``).

PATH is a Syne Tune experiment folder or a tuner name under Syne Tune's experiment root
(``$SYNETUNE_FOLDER``, else ``~/syne-tune``), of a finished run or one still running. It prints
the model to take home and a summary, and writes ``report.txt``, ``timeline.png`` and
``curves.png`` into ``PATH/report`` (``--out`` elsewhere). The pictures need matplotlib (the
extra ``syne-dyhpo[report]``); without it the text is printed and written alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from syne_dyhpo.report.loading import Run, load_run
from syne_dyhpo.report.summary import Summary, TakeHome, TrialHistory, report_text, summarise, take_home, trial_histories

REPORT_EXTRA = "pip install 'syne-dyhpo[report]'"


@dataclass
class Report:
    """What :func:`make_report` read and wrote.

    :param timeline: the timeline PNG (None without matplotlib)
    :param curves: the learning-curves PNG (None without matplotlib)
    """

    run: Run
    histories: dict[int, TrialHistory]
    summary: Summary
    take_home: TakeHome
    lines: list[str]
    text_path: Path
    timeline: Path | None
    curves: Path | None

    def paths_lines(self) -> list[str]:
        """Where the report's files are, one line each."""
        lines = [f"Report: {self.text_path}"]
        if self.timeline is not None:
            lines += [f"Timeline: {self.timeline}", f"Learning curves: {self.curves}"]
        else:
            lines.append(f"No pictures: they need matplotlib ({REPORT_EXTRA})")
        return lines


def make_report(path_or_name: str | Path, out: str | Path | None = None, pictures: bool = True) -> Report:
    """Reads the run, writes the report's files (see the module docstring).

    :param path_or_name: experiment folder or tuner name
    :param out: folder of the report's files. Defaults to ``<experiment folder>/report``
    :param pictures: draw the PNGs (if matplotlib is installed)
    """
    run = load_run(path_or_name)
    histories = trial_histories(run)
    summary = summarise(run, histories)
    home = take_home(run, histories)
    lines = report_text(run, summary, home)
    folder = Path(out) if out is not None else run.path / "report"
    folder.mkdir(parents=True, exist_ok=True)
    timeline = curves = None
    if pictures and _has_matplotlib():
        from syne_dyhpo.report.curves import plot_curves
        from syne_dyhpo.report.timeline import plot_timeline

        timeline = plot_timeline(run, histories, home, folder / "timeline.png")
        curves = plot_curves(run, histories, home, folder / "curves.png")
    text_path = folder / "report.txt"
    report = Report(run, histories, summary, home, lines, text_path, timeline, curves)
    text_path.write_text("\n".join(lines + [""] + report.paths_lines()) + "\n")
    return report


def _has_matplotlib() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="syne-dyhpo report", description=__doc__.split("\n\n")[0])
    p.add_argument("path", help="Syne Tune experiment folder, or tuner name under $SYNETUNE_FOLDER (~/syne-tune)")
    p.add_argument("--out", default=None, help="folder of the report's files (default: PATH/report)")
    p.add_argument("--no-pictures", action="store_true", help="text only")
    return p


def main(argv: list[str] | None = None) -> int:
    """``syne-dyhpo report PATH`` (also ``syne-dyhpo PATH``); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["report"]:
        argv = argv[1:]
    args = build_parser().parse_args(argv)
    try:
        report = make_report(args.path, args.out, pictures=not args.no_pictures)
    except (FileNotFoundError, ValueError) as err:
        print(f"syne-dyhpo report: {err}", file=sys.stderr)
        return 2
    print("\n".join(report.lines + [""] + report.paths_lines()))
    return 0
