"""How good a completion's leader would have to be for the completion to cost no anytime regret,
estimated from runs without a completion (the *explorer*) and the table's full learning curves.

A completion trains one leader to ``max_t`` early, so that a run holds a trained model soon;
its epochs are taken from exploration. This script asks, for a choice of leader, what the
explorer's runs would have scored had they spent those epochs on it. For every explorer run:

- when the ``after``-th configuration reports its first epoch (when the completion chooses
  its leader, ``IncumbentCompletion.after``), the trials reported so far are the candidates,
  and a *rule* picks one;
- training it to ``max_t`` takes the ``max_t - done`` epochs it lacks; on one of ``workers``
  workers it gets about one in every ``workers`` epochs of the run, so by budget point ``B`` it
  has had ``spent = min(max_t - done, (B - chosen) // workers)`` of them;
- estimated **anytime regret** after ``B`` epochs: the better of the explorer's anytime regret
  after ``B - spent`` epochs and the leader's best value over the epochs it reached (from the
  table);
- estimated **fully-trained regret**: the better of the explorer's fully-trained regret after
  ``B - spent`` and the leader's value at ``max_t`` if it got there (1 if neither).

The estimate is optimistic for the completion: it assumes that exploration with ``spent``
fewer epochs goes as the explorer's first ``B - spent`` did, although a real completion also
pulls the model and the acquisition's incumbents towards the leader. Against a method that
runs the rule, ``--actual`` shows how optimistic (rule ``best-so-far`` is DyHPO's).

Rules:

- ``best-so-far``: the candidate with the best value seen (the scheduler's completion);
- ``rank-K``: in hindsight, the candidate whose value at ``max_t`` ranks ``K``-th among them
  (``rank-1``: an oracle that knows the final values; it bounds every rule);
- ``predicted:METHOD``: the candidate with the best posterior mean at ``max_t`` of the
  surrogate of ``METHOD`` (a runner method name, e.g. ``predicted:DeepPowerLaw``) fitted on
  the results reported so far.

::

    PYTHONPATH=. python benchmarks/leader_bound.py R --explorer DyHPO-default-no-completion \\
        --reference DyHPO-v0.1 --actual DyHPO --after 27 --rules best-so-far rank-1 rank-2 \\
        predicted:DeepPowerLaw --at 250 500 1000

Runs are those of ``run_benchmarks.py`` on tables (``results.csv.gz`` with the configurations'
``config_*`` columns): the candidates' curves are looked up in the table of the run's
``source`` and ``task``, at the run's table seed (``seed % num_seeds``).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from benchmarks.metrics import normalized_regret
from benchmarks.report import RunRecord, load_runs, signed_rank_test
from benchmarks.runner import RESULTS_FILE, RunSpec, run_dir

#: the columns of a run's group (:attr:`~benchmarks.report.RunRecord.group`) in the estimates
GROUP = ("benchmark", "task", "seed", "budget_epochs", "n_workers")

#: prefix of the rule that ranks candidates by a surrogate's prediction at ``max_t``
PREDICTED = "predicted:"


@dataclass
class Table:
    """A task's table: its definition, hyperparameters per row, configurations per row (as the
    runner offers them) and the metric's curves, shape (rows, seeds, max_t)."""

    definition: Any
    hyperparameters: pd.DataFrame
    configs: list[dict[str, Any]]
    config_space: dict[str, Any]
    curves: np.ndarray


def load_table(source: str, task: str) -> Table:
    """:param source: a run's ``source`` (serialized folder or repository name)"""
    from benchmarks.blackboxes import load_benchmark
    from benchmarks.table import table_configs

    definition, bb = load_benchmark(source, task=task)
    metric = bb.objectives_names.index(definition.metric)
    return Table(definition, bb.hyperparameters, table_configs(bb), bb.configuration_space, bb.objectives_evaluations[..., metric])


def table_rows(results: pd.DataFrame, hyperparameters: pd.DataFrame) -> dict[int, int]:
    """The table row of every trial of a run, matched on its ``config_*`` columns: numerical
    values up to the rounding of a CSV file, others exactly.

    :raises ValueError: a trial whose configuration is not a row of the table
    """
    columns = list(hyperparameters.columns)
    missing = [f"config_{c}" for c in columns if f"config_{c}" not in results]
    if missing:
        raise ValueError(f"results lack the configuration columns {missing}")
    numerical = [c for c in columns if pd.api.types.is_numeric_dtype(hyperparameters[c])]
    table = hyperparameters[numerical].to_numpy(dtype=float)
    scale = np.abs(table).max(axis=0) + 1e-12
    rows = {}
    for trial_id, trial in results.groupby("trial_id", sort=False):
        config = trial[[f"config_{c}" for c in columns]].iloc[0]
        distance = np.abs((table - config[[f"config_{c}" for c in numerical]].to_numpy(dtype=float)) / scale).sum(axis=1)
        for c in columns:
            if c not in numerical:
                distance = np.where(hyperparameters[c].astype(str).to_numpy() == str(config[f"config_{c}"]), distance, np.inf)
        row = int(np.argmin(distance))
        if not distance[row] <= 1e-6 * len(columns):
            raise ValueError(f"trial {trial_id}: configuration {dict(zip(columns, config))} is not a row of the table")
        rows[int(trial_id)] = row
    return rows


def candidates_when(results: pd.DataFrame, metric: str, do_minimize: bool, after: int) -> tuple[int, pd.DataFrame] | None:
    """The candidates when the ``after``-th configuration reported its first epoch.

    :return: ``(epochs observed by then, candidates)``, candidates indexed by trial id with
        their best value so far (``best``, in the metric's own direction) and last epoch
        (``done``); None if fewer than ``after`` configurations reported a first epoch
    """
    firsts = np.flatnonzero(results["epoch"].to_numpy() == 1)
    if len(firsts) < after:
        return None
    seen = results.iloc[: firsts[after - 1] + 1].groupby("trial_id")
    best = seen[metric].min() if do_minimize else seen[metric].max()
    return int(firsts[after - 1]) + 1, pd.DataFrame({"best": best, "done": seen["epoch"].max()})


def surrogate_means_at_max_t(method: str, table: Table, seed: int, seen: pd.DataFrame, rows: dict[int, int]) -> pd.Series:
    """Posterior mean at ``max_t`` (normalised, higher is better) of every trial in ``seen``,
    from the surrogate of runner method ``method`` fitted on ``seen``'s results."""
    from benchmarks.runner import METHODS
    from syne_dyhpo.core.candidates import make_candidates
    from syne_dyhpo.core.observations import Observations
    from syne_dyhpo.search_space import ConfigEncoder

    if method not in METHODS:
        raise KeyError(f"Unknown method {method} in rule {PREDICTED}{method}; known: {sorted(METHODS)}")
    d = table.definition
    scheduler = METHODS[method](d, table.config_space, table.configs, seed)
    encoder = ConfigEncoder(table.config_space)  # the scheduler's encoding of the table's space
    observations = Observations(d.max_t, d.do_minimize)
    records = {}
    for trial_id, epoch, value in seen[["trial_id", "epoch", d.metric]].itertuples(index=False):
        if trial_id not in records:
            config = table.configs[rows[trial_id]]
            records[trial_id] = observations.add_trial(trial_id, config, encoder.encode(config))
        observations.add_result(trial_id, int(epoch), float(value))
    model = scheduler.policy.fit(observations, seed=seed)
    ids = sorted(records)
    candidates = make_candidates([records[i] for i in ids], [], np.zeros((0, encoder.dim)), observations, lambda r: d.max_t)
    mean, _ = model.predict(candidates, np.full(len(ids), d.max_t))
    return pd.Series(np.asarray(mean, dtype=float), index=ids)


def parse_rule(rule: str) -> tuple[str, int | str | None]:
    """``(kind, argument)`` of a rule: ``("best-so-far", None)``, ``("rank", K)`` or
    ``("predicted", METHOD)``.

    :raises ValueError: not one of the module docstring's rules
    """
    if rule == "best-so-far":
        return "best-so-far", None
    if rule.startswith("rank-"):
        rank = int(rule[len("rank-"):])
        if rank < 1:
            raise ValueError(f"rule {rule}: ranks start at 1")
        return "rank", rank
    if rule.startswith(PREDICTED):
        return "predicted", rule[len(PREDICTED):]
    raise ValueError(f"Unknown rule {rule!r}: best-so-far, rank-K or {PREDICTED}METHOD")


def choose_leader(rule: str, candidates: pd.DataFrame, final: pd.Series, do_minimize: bool, predict: Callable[[str], pd.Series]) -> int:
    """The trial id ``rule`` picks (see the module docstring).

    :param candidates: see :func:`candidates_when`
    :param final: value at ``max_t`` (table) of each candidate
    :param predict: method name -> the surrogate's means at ``max_t`` of the candidates
    """
    kind, argument = parse_rule(rule)
    sign = -1.0 if do_minimize else 1.0
    if kind == "best-so-far":
        return int((sign * candidates["best"]).idxmax())
    if kind == "rank":
        order = (sign * final).sort_values(ascending=False, kind="stable")
        return int(order.index[min(argument, len(order)) - 1])
    return int(predict(argument).idxmax())


def estimate(
    run: RunRecord,
    results: pd.DataFrame,
    table: Table,
    rows: dict[int, int],
    after: int,
    rules: Sequence[str],
    budget_points: Sequence[int],
) -> list[dict[str, Any]]:
    """The module docstring's estimates for one explorer run: one row per rule, with the
    leader's regret at ``max_t`` (``leader_final``) and its rank there among the candidates
    (``leader_rank``, 1: the best; ``candidates`` of them), when it was chosen (``chosen``,
    epochs), and per budget point ``B`` the estimated ``anytime@B`` and ``trained@B`` and
    whether the leader reached ``max_t`` by then (``finished@B``). Empty if fewer than
    ``after`` configurations reported a first epoch.

    :param rows: the table row of every trial (:func:`table_rows`)"""
    d = table.definition
    found = candidates_when(results, d.metric, d.do_minimize, after)
    if found is None:
        return []
    chosen, candidates = found
    curves = table.curves[:, int(run.summary["seed"]) % table.curves.shape[1], :]
    best_of = np.nanmin if d.do_minimize else np.nanmax
    final = pd.Series({t: curves[rows[t], d.max_t - 1] for t in candidates.index})
    bounds = run.summary["bounds"]
    workers = int(run.summary["n_workers"])
    predictions: dict[str, pd.Series] = {}

    def predict(method: str) -> pd.Series:
        if method not in predictions:
            predictions[method] = surrogate_means_at_max_t(method, table, int(run.summary["seed"]), results.iloc[:chosen], rows)
        return predictions[method]

    # 1: the best value at max_t among the candidates
    final_rank = (final if d.do_minimize else -final).rank(method="min")
    out = []
    for rule in rules:
        leader = choose_leader(rule, candidates, final, d.do_minimize, predict)
        done = int(candidates.loc[leader, "done"])
        row = dict(
            **dict(zip(GROUP, run.group)), rule=rule, after=after, chosen=chosen, candidates=len(candidates),
            leader_final=float(normalized_regret(final[leader], bounds["best_any"], bounds["worst"])),
            leader_rank=int(final_rank[leader]),
        )
        for budget in budget_points:
            spent = int(min(d.max_t - done, max(0, (budget - chosen) // workers)))
            reached = done + spent
            leader_best = normalized_regret(best_of(curves[rows[leader], :reached]), bounds["best_any"], bounds["worst"])
            leader_trained = row["leader_final"] if reached >= d.max_t else 1.0
            row[f"anytime@{budget}"] = float(min(run.regret_curve([budget - spent])[0], leader_best))
            row[f"trained@{budget}"] = float(min(run.regret_curve([budget - spent], column="trained_incumbent")[0], leader_trained))
            row[f"finished@{budget}"] = reached >= d.max_t
        out.append(row)
    return out


def summary_table(
    estimates: pd.DataFrame, others: dict[str, dict[tuple, RunRecord]], reference: str, budget_points: Sequence[int]
) -> str:
    """Per (after, rule): means of the estimates, and the reference's (and any other method's)
    regrets on the same runs (:attr:`~benchmarks.report.RunRecord.group`), with the signed-rank
    test of estimate against reference (anytime regret, the runs both have).

    :param others: method -> its runs by group"""
    lines = []
    for (after, rule), group in estimates.groupby(["after", "rule"], sort=False):
        keys = list(group[list(GROUP)].itertuples(index=False, name=None))
        lines.append(
            f"leader chosen after {after} first epochs (at {group['chosen'].mean():.1f} epochs), rule {rule}: "
            f"{len(group)} runs, {group['candidates'].mean():.1f} candidates; leader's regret at max_t "
            f"{group['leader_final'].mean():.3f}, its rank there 1 in {(group['leader_rank'] == 1).mean():.0%} of runs "
            f"(median rank {group['leader_rank'].median():.0f})"
        )
        for budget in budget_points:
            anytime = group[f"anytime@{budget}"].to_numpy()
            parts = [
                f"  after {budget}: estimated anytime {anytime.mean():.4f}, fully trained "
                f"{group[f'trained@{budget}'].mean():.3f}, leader trained in {group[f'finished@{budget}'].mean():.0%}"
            ]
            for method, runs in others.items():
                have = [k in runs for k in keys]
                regrets = np.array([runs[k].regret_curve([budget])[0] for k in keys if k in runs])
                trained = np.array([runs[k].regret_curve([budget], column="trained_incumbent")[0] for k in keys if k in runs])
                text = f"{method} {regrets.mean():.4f} / {trained.mean():.3f}" if len(regrets) else f"{method} (no runs)"
                if method == reference and len(regrets):
                    test = signed_rank_test(anytime[have], regrets)
                    text += f" (anytime p = {test['p']:.3f}, {test['wins']} wins / {test['losses']} losses)"
                parts.append(text)
            lines.append("; ".join(parts))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results_dir", help="--results-dir of run_benchmarks.py")
    p.add_argument("--explorer", required=True, help="method without a completion whose runs are replayed")
    p.add_argument("--reference", required=True, help="method the estimates are tested against")
    p.add_argument("--actual", nargs="*", default=[], help="methods shown beside (e.g. one that runs a rule)")
    p.add_argument("--after", nargs="+", type=int, default=[27], help="first epochs before the leader is chosen")
    p.add_argument("--rules", nargs="+", default=["best-so-far", "rank-1"], help="best-so-far, rank-K, predicted:METHOD")
    p.add_argument("--at", nargs="+", type=int, default=[250, 500, 1000], help="budget points in epochs")
    p.add_argument("--workers", type=int, default=None, help="only runs with this many workers")
    p.add_argument("--csv", default=None, help="write the per-run estimates here")
    a = p.parse_args(argv)
    if any(x < 1 for x in a.after):
        raise SystemExit(f"--after must be at least 1, got {a.after}")
    for rule in a.rules:  # fail before hours of replay, not after
        parse_rule(rule)
    runs = [r for r in load_runs(a.results_dir) if a.workers is None or r.summary["n_workers"] == a.workers]
    by_method: dict[str, dict[tuple, RunRecord]] = {}
    for run in runs:
        by_method.setdefault(run.summary["method"], {})[run.group] = run
    explorer = by_method.get(a.explorer, {})
    if not explorer:
        raise SystemExit(f"no runs of {a.explorer} under {a.results_dir}")
    tables: dict[tuple[str, str], Table] = {}
    rows = []
    for group, run in sorted(explorer.items()):
        key = (run.summary["source"], run.summary["task"])
        if key not in tables:
            tables[key] = load_table(*key)
        results = pd.read_csv(_run_folder(Path(a.results_dir), run) / RESULTS_FILE)
        trial_rows = table_rows(results, tables[key].hyperparameters)
        for after in a.after:
            rows += estimate(run, results, tables[key], trial_rows, after, a.rules, a.at)
    estimates = pd.DataFrame(rows)
    if a.csv:
        estimates.to_csv(a.csv, index=False)
    others = {m: by_method.get(m, {}) for m in [a.reference, *a.actual]}
    print(f"{a.explorer}'s runs replayed: {len(explorer)}; reference {a.reference}; columns: anytime / fully trained")
    print(summary_table(estimates, others, a.reference, a.at))


def _run_folder(results_dir: Path, run: RunRecord) -> Path:
    s = run.summary
    spec = RunSpec(method=s["method"], source=s["source"], task=s["task"], seed=s["seed"], budget_epochs=s["budget_epochs"], n_workers=s["n_workers"])
    return run_dir(spec, results_dir)


if __name__ == "__main__":
    main()
