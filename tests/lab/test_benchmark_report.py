"""Report tables: the paired comparison and its test, grouping by workers, and a report made
from real (tiny) runs of RandomSearch and ASHA on the data the repo ships."""

import json

import numpy as np
import pandas as pd
import pytest
from conftest import data_folder

from benchmarks.report import (
    POOLED,
    make_report,
    paired_comparison,
    signed_rank_test,
    summary_table,
)
from benchmarks.runner import RESULTS_FILE, RunSpec, run_dir, run_one

# --- signed-rank test --------------------------------------------------------------------------


def test_signed_rank_strictly_better_on_every_pair():
    ref = np.full(8, 0.3)
    res = signed_rank_test(ref - 0.01 * np.arange(1, 9), ref)
    assert (res["pairs"], res["wins"], res["ties"], res["losses"]) == (8, 8, 0, 0)
    assert res["mean_diff"] == pytest.approx(-0.045)
    # exact two-sided: all signs negative has probability 2 / 2**8
    assert res["p"] == pytest.approx(2 / 2**8)
    # symmetric: the reference against the method loses every pair, same p
    rev = signed_rank_test(ref, ref - 0.01 * np.arange(1, 9))
    assert rev["losses"] == 8 and rev["p"] == pytest.approx(res["p"])


def test_signed_rank_ties_are_counted_and_dropped():
    same = signed_rank_test([0.1, 0.0, 1.0], [0.1, 0.0, 1.0])
    assert (same["wins"], same["ties"], same["losses"]) == (0, 3, 0)
    assert same["p"] == 1.0 and same["mean_diff"] == 0.0  # only ties: no evidence, p = 1
    # float noise below the tolerance is a tie too
    assert signed_rank_test([0.1 + 1e-15], [0.1])["ties"] == 1
    # one tie among 4: tested on the 3 others, |d| ranks 0.05 -> 1, 0.1 -> 2, 0.2 -> 3;
    # R+ = 1, two-sided exact p = 2 * P(R+ <= 1) = 2 * 2 / 8
    mixed = signed_rank_test([0.0, 0.0, 0.5, 0.35], [0.1, 0.2, 0.5, 0.3])
    assert (mixed["wins"], mixed["ties"], mixed["losses"]) == (2, 1, 1)
    assert mixed["p"] == pytest.approx(0.5)
    empty = signed_rank_test([], [])
    assert empty["pairs"] == 0 and np.isnan(empty["p"]) and np.isnan(empty["mean_diff"])


# --- paired comparison and grouping on a hand-built long table --------------------------------


def _rows(bench, n_workers, method, tasks, seeds, points):
    """``points``: {budget_point: (regret, trained_regret)}, values scalars or per-pair arrays."""
    rows = []
    pairs = [(t, s) for t in tasks for s in seeds]
    for f, (reg, tr) in points.items():
        reg, tr = np.broadcast_to(reg, len(pairs)), np.broadcast_to(tr, len(pairs))
        for i, (task, seed) in enumerate(pairs):
            rows.append(dict(
                benchmark=bench, n_workers=n_workers, task=task, seed=seed, budget=100,
                method=method, budget_point=f, regret=float(reg[i]), trained_regret=float(tr[i]),
                epochs=100, trials_started=10, trials_trained=2, first_epoch_share=0.1,
                stopped_after_first_share=0.05, speedup=np.nan, scheduler_seconds=1.0,
                wall_seconds=2.0,
            ))
    return rows


@pytest.fixture
def long():
    tasks, seeds = ["t1", "t2"], [0, 1, 2]
    rows = []
    # 1 worker: ASHA better at 50 %, BOHB better at 100 % (both regrets)
    rows += _rows("b", 1, "ASHA", tasks, seeds, {0.5: (0.3, 0.9), 1.0: (0.3, 0.8)})
    rows += _rows("b", 1, "BOHB", tasks, seeds, {0.5: (0.4, 0.95), 1.0: (0.2, 0.7)})
    rows += _rows("b", 1, "RandomSearch", tasks, seeds, {0.5: (0.0, 0.0), 1.0: (0.0, 0.0)})
    # DyHPO: lower anytime regret on every pair at 100 %, nothing trained (fully-trained 1)
    dy = 0.1 + 0.01 * np.arange(6)
    rows += _rows("b", 1, "DyHPO", tasks, seeds, {0.5: (0.3, 1.0), 1.0: (dy, 1.0)})
    # a variant identical to BOHB at 100 %
    rows += _rows("b", 1, "DyHPO-no-completion", tasks, seeds, {0.5: (0.4, 0.95), 1.0: (0.2, 0.7)})
    # 4 workers: no BOHB; DyHPO lacks seed 2
    rows += _rows("b", 4, "ASHA", ["t1"], seeds, {1.0: (0.5, 0.5)})
    rows += _rows("b", 4, "DyHPO", ["t1"], [0, 1], {1.0: (0.4, 0.6)})
    # a family without references: nothing to compare
    rows += _rows("c", 1, "DyHPO", tasks, seeds, {1.0: (0.1, 0.1)})
    rows += _rows("c", 1, "RandomSearch", tasks, seeds, {1.0: (0.2, 0.2)})
    return pd.DataFrame(rows)


def _cell(paired, **kw):
    sel = paired
    for k, v in kw.items():
        sel = sel[sel[k] == v]
    assert len(sel) == 1, kw
    return sel.iloc[0]


def test_paired_comparison_against_best_reference(long):
    paired = paired_comparison(long)
    assert set(paired["benchmark"]) == {"b"}  # family c has no ASHA/BOHB
    assert set(paired["method"]) == {"DyHPO", "DyHPO-no-completion"}  # RandomSearch is neither
    w1 = dict(benchmark="b", n_workers=1, task=POOLED)
    r = _cell(paired, **w1, budget="100%", regret="anytime", method="DyHPO")
    assert r["reference"] == "BOHB" and r["pairs"] == 6
    assert (r["wins"], r["ties"], r["losses"], r["W/T/L"]) == (6, 0, 0, "6/0/0")
    assert r["diff"] == pytest.approx(0.125 - 0.2) and r["mean"] == pytest.approx(0.125)
    assert r["p"] == pytest.approx(2 / 2**6)
    assert r["ratio to ASHA"] == pytest.approx(0.125 / 0.3)
    # at 50 % ASHA is the better reference; DyHPO ties it everywhere
    r = _cell(paired, **w1, budget="50%", regret="anytime", method="DyHPO")
    assert r["reference"] == "ASHA" and r["ties"] == 6 and r["p"] == 1.0
    # fully trained: nothing trained by DyHPO, it loses every pair against BOHB's 0.7
    r = _cell(paired, **w1, budget="100%", regret="fully-trained", method="DyHPO")
    assert r["reference"] == "BOHB" and r["losses"] == 6 and r["diff"] == pytest.approx(0.3)
    assert r["ratio to ASHA"] == pytest.approx(1.0 / 0.8)
    r = _cell(paired, **w1, budget="100%", regret="anytime", method="DyHPO-no-completion")
    assert r["ties"] == 6 and r["p"] == 1.0
    # per task: 3 seeds each
    r = _cell(paired, benchmark="b", n_workers=1, task="t1", budget="100%", regret="anytime",
              method="DyHPO")
    assert r["pairs"] == 3 and r["wins"] == 3 and r["p"] == pytest.approx(2 / 2**3)
    # 4 workers: grouped apart; ASHA is the only reference; only the 2 seeds both ran pair up
    r = _cell(paired, benchmark="b", n_workers=4, task=POOLED, budget="100%", regret="anytime",
              method="DyHPO")
    assert r["reference"] == "ASHA" and r["pairs"] == 2 and r["diff"] == pytest.approx(-0.1)
    assert r["ratio to ASHA"] == pytest.approx(0.8)
    # one row per (benchmark, workers, scope, budget, kind, method): 1 worker has 2 budget
    # points x 2 kinds x 2 methods x (pooled + 2 tasks); 4 workers 1 x 2 x 1 x (pooled + 1 task)
    assert len(paired) == 2 * 2 * 2 * 3 + 1 * 2 * 1 * 2
    pooled = paired_comparison(long, per_task=False)
    assert set(pooled["task"]) == {POOLED} and len(pooled) == 2 * 2 * 2 + 1 * 2 * 1


def test_summary_groups_by_workers(long):
    table = summary_table(long)
    b = table[table["benchmark"] == "b"]
    assert list(zip(b["n_workers"], b["method"])) == [
        (1, "DyHPO"), (1, "DyHPO-no-completion"), (1, "ASHA"), (1, "BOHB"), (1, "RandomSearch"),
        (4, "DyHPO"), (4, "ASHA"),
    ]
    dy1 = b[(b["n_workers"] == 1) & (b["method"] == "DyHPO")].iloc[0]
    assert dy1["runs"] == 6 and dy1["regret@100%"] == pytest.approx(0.125)
    assert dy1["trained regret@100%"] == 1.0 and dy1["regret@50%"] == pytest.approx(0.3)
    dy4 = b[(b["n_workers"] == 4) & (b["method"] == "DyHPO")].iloc[0]
    assert dy4["runs"] == 2 and dy4["regret@100%"] == pytest.approx(0.4)
    assert dy4["trained regret@100%"] == pytest.approx(0.6)


# --- a report from real runs ------------------------------------------------------------------

TASK = "Australian"
MAX_T = 50
BUDGET = 2 * MAX_T


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """RandomSearch and ASHA, 2 seeds, 1 and 2 workers, 100 epochs on a shipped LCBench task."""
    root = tmp_path_factory.mktemp("results")
    specs = [
        RunSpec(m, str(data_folder("lcbench")), TASK, seed, BUDGET, w)
        for m in ("RandomSearch", "ASHA") for seed in (0, 1) for w in (1, 2)
    ]
    for spec in specs:
        run_one(spec, root)
    return root, specs


def _trained_by_hand(spec, root):
    """Trials with a result at max_t among the first BUDGET results in simulated-time order."""
    df = pd.read_csv(run_dir(spec, root) / RESULTS_FILE)
    df = df.sort_values("st_tuner_time", kind="stable").iloc[:BUDGET]
    return df.loc[df["epoch"] == MAX_T, "trial_id"].nunique(), df["trial_id"].nunique()


@pytest.mark.slow  # starts a Tuner, Ray or a process
def test_report_from_real_runs(results, tmp_path):
    root, specs = results
    md = make_report(root, tmp_path, ours=("ASHA",), references=("RandomSearch",))
    for name in ("summary", "per_task", "paired"):
        assert (tmp_path / f"{name}.md").stat().st_size > 100
    for name in ("regret_lcbench", "regret_lcbench_w2", "trained_regret_lcbench",
                 "trained_regret_lcbench_w2", f"regret_time_lcbench_{TASK}_w2"):
        assert (tmp_path / f"{name}.png").stat().st_size > 1000, name
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert sorted(zip(summary["n_workers"], summary["method"])) == [
        (1, "ASHA"), (1, "RandomSearch"), (2, "ASHA"), (2, "RandomSearch")
    ]
    for _, row in summary.iterrows():
        mine = [s for s in specs if s.method == row["method"] and s.n_workers == row["n_workers"]]
        stored = [json.loads((run_dir(s, root) / "run.json").read_text()) for s in mine]
        # the runner's own regret (run.json) and the report agree
        assert row["regret@100%"] == pytest.approx(np.mean([s["regret"]["1.0"] for s in stored]))
        counts = [_trained_by_hand(s, root) for s in mine]
        assert row["trained"] == pytest.approx(np.mean([c[0] for c in counts]))
        assert row["started"] == pytest.approx(np.mean([c[1] for c in counts]))
    long = pd.read_csv(tmp_path / "long.csv")
    # fully trained is never better than anytime; random search with 1 worker trains each trial
    assert (long["trained_regret"] >= long["regret"] - 1e-12).all()
    rs1 = long[(long["method"] == "RandomSearch") & (long["n_workers"] == 1)
               & (long["budget_point"] == 1.0)]
    assert (rs1["trials_trained"] == 2).all() and (rs1["stopped_after_first_share"] == 0).all()
    paired = pd.read_csv(tmp_path / "paired.csv")
    pooled = paired[(paired["task"] == POOLED) & (paired["budget"] == "100%")]
    assert set(pooled["n_workers"]) == {1, 2} and (pooled["pairs"] == 2).all()
    assert (pooled["reference"] == "RandomSearch").all()
    assert "## Pooled over tasks" in md and "| lcbench | 2 | ASHA |" in md


@pytest.mark.slow  # starts a Tuner, Ray or a process
def test_report_with_missing_methods_and_worker_filter(results, tmp_path):
    root, _ = results
    # default comparison (DyHPO/DeepPowerLaw vs ASHA/BOHB): no run of ours, the rest still works
    md = make_report(root, tmp_path, n_workers=[2], methods=["ASHA"], plots=False)
    assert "no paired comparison" in (tmp_path / "paired.md").read_text()
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert list(zip(summary["n_workers"], summary["method"])) == [(2, "ASHA")]
    assert "| lcbench | 2 | ASHA | 2 |" in md
    assert not list(tmp_path.glob("*.png"))
    assert make_report(root, tmp_path, n_workers=[4]) == "(no finished runs)"


@pytest.mark.slow  # starts a Tuner, Ray or a process
def test_cli_runs_the_grid_per_worker_count(tmp_path):
    from benchmarks import run_benchmarks

    args = ["--data", str(data_folder("lcbench")), "--tasks", TASK, "--methods", "RandomSearch",
            "--seeds", "0", "--budget-factor", "0.4", "--n-jobs", "1",
            "--results-dir", str(tmp_path / "res"), "--report-dir", str(tmp_path / "rep")]
    assert run_benchmarks.main(args + ["--n-workers", "1", "2"]) == 0
    runs = sorted(p.parent.name for p in (tmp_path / "res").rglob("run.json"))
    assert runs == ["seed0-budget20-w1", "seed0-budget20-w2"]
    summary = pd.read_csv(tmp_path / "rep" / "summary.csv")
    assert sorted(summary["n_workers"]) == [1, 2] and (summary["runs"] == 1).all()
    # --report-only with one worker count reports only that one
    assert run_benchmarks.main(args + ["--n-workers", "2", "--report-only"]) == 0
    assert list(pd.read_csv(tmp_path / "rep" / "summary.csv")["n_workers"]) == [2]
