"""Regret and scheduler compute of methods from several results dirs, paired by (task, seed):
the table of ``docs/speed.md``.

Each argument is ``LABEL=RESULTS_DIR:METHOD``; the first is the reference of the paired
differences. Only (task, seed) pairs every column has are used (1 worker runs)::

    PYTHONPATH=. python benchmarks/speed_table.py before=/work/results-speed/baseline:DyHPO \\
        after=/work/results-speed/final:DyHPO BOHB=/work/results-speed/baseline:BOHB

Per benchmark family (LCBench: lcbench + lcbench-extra; TaskSet) it prints the mean normalised
regret at 25/50/100 % of the budget, the paired difference to the reference with a 95 %
bootstrap interval over tasks (seeds averaged per task first, so an interval is seed noise
and task variety, not seed noise alone), and the scheduler's compute per run (CPU and wall
seconds inside scheduler calls), with the ratio of CPU seconds to BOHB's where a column is
labelled BOHB.
"""

from __future__ import annotations

import argparse
import glob
import json
from collections import defaultdict

import numpy as np

from benchmarks.ablation import FAMILIES

FRACTIONS = ("0.25", "0.5", "1.0")


def load(spec: str) -> dict[tuple[str, str, int], dict]:
    directory, method = spec.rsplit(":", 1)
    runs = {}
    for path in glob.glob(f"{directory}/*/*/{method}/seed*-w1/run.json"):
        with open(path) as f:
            run = json.load(f)
        family = FAMILIES.get(run["benchmark"], run["benchmark"])
        runs[(family, run["task"], int(run["seed"]))] = run
    return runs


def bootstrap_ci(per_task: np.ndarray, rng: np.random.RandomState, num: int = 4000) -> tuple[float, float]:
    if len(per_task) < 2:
        return float("nan"), float("nan")
    means = per_task[rng.randint(len(per_task), size=(num, len(per_task)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def table(columns: list[tuple[str, dict]]) -> str:
    keys = set.intersection(*(set(runs) for _, runs in columns))
    rng = np.random.RandomState(0)
    ref_label, ref = columns[0]
    lines = []
    for family in ("LCBench", "TaskSet"):
        fam_keys = sorted(k for k in keys if k[0] == family)
        if not fam_keys:
            continue
        tasks = sorted({k[1] for k in fam_keys})
        seeds = sorted({k[2] for k in fam_keys})
        lines += [f"### {family}: {len(tasks)} tasks x seeds {seeds} ({len(fam_keys)} runs)", "",
                  "| method | regret 25 % | regret 50 % | regret 100 % | vs " + ref_label + " (25 / 50 / 100 %, 95 % CI over tasks) "
                  "| scheduler CPU s/run | wall s/run | CPU / BOHB |", "|---|---|---|---|---|---|---|---|"]
        bohb = next((runs for label, runs in columns if label == "BOHB"), None)
        bohb_cpu = np.mean([bohb[k]["scheduler_cpu_seconds"] for k in fam_keys]) if bohb else None
        for label, runs in columns:
            reg = np.array([[runs[k]["regret"][q] for q in FRACTIONS] for k in fam_keys])
            cpu = np.mean([runs[k]["scheduler_cpu_seconds"] for k in fam_keys])
            wall = np.mean([runs[k]["scheduler_seconds"] for k in fam_keys])
            diffs = []
            if label != ref_label:
                for j, q in enumerate(FRACTIONS):
                    per_task = defaultdict(list)
                    for k in fam_keys:
                        per_task[k[1]].append(runs[k]["regret"][q] - ref[k]["regret"][q])
                    d = np.array([np.mean(v) for v in per_task.values()])
                    lo, hi = bootstrap_ci(d, rng)
                    diffs.append(f"{d.mean():+.4f} [{lo:+.4f}, {hi:+.4f}]")
            ratio = f"{cpu / bohb_cpu:.1f}x" if bohb_cpu else "-"
            lines.append(f"| {label} | {reg[:, 0].mean():.4f} | {reg[:, 1].mean():.4f} | {reg[:, 2].mean():.4f} | "
                         f"{' / '.join(diffs) if diffs else '(reference)'} | {cpu:.1f} | {wall:.1f} | {ratio} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("columns", nargs="+", help="LABEL=RESULTS_DIR:METHOD; the first is the reference")
    args = p.parse_args(argv)
    columns = [(c.split("=", 1)[0], load(c.split("=", 1)[1])) for c in args.columns]
    print(table(columns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
