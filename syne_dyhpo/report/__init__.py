"""``syne-dyhpo report PATH``: what a freeze-thaw run did, and the model to take home.

- :mod:`~syne_dyhpo.report.loading`: reads an experiment folder (Syne Tune's results, the
  decision log), warning of what it cannot read;
- :mod:`~syne_dyhpo.report.ray_results`: Ray Tune's results of a Ray experiment folder;
- :mod:`~syne_dyhpo.report.summary`: counts, the model to take home, the text;
- :mod:`~syne_dyhpo.report.job_starts`: job starts and the share of worker time they took;
- :mod:`~syne_dyhpo.report.timeline` and :mod:`~syne_dyhpo.report.curves`: the pictures
  (matplotlib, the extra ``syne-dyhpo[report]``);
- :mod:`~syne_dyhpo.report.cli`: the command line.

:func:`make_report` does it all: ``make_report("~/syne-tune/my-run-2026-...")``.
"""

from syne_dyhpo.report.cli import Report, main, make_report

__all__ = ["Report", "main", "make_report"]
