"""FCNet, NAS-Bench-201 and PD1 by name, in Syne Tune 0.16's exact schemas, end to end.

Synthetic blackboxes (benchmarks/synthetic.py) are written to a temporary folder playing
``~/.blackbox-repository``; the loader is pointed at it with the environment variable
``SYNE_DYHPO_BLACKBOX_REPOSITORY`` (benchmarks.blackboxes.REPOSITORY_ENV), which it hands to
Syne Tune's ``load_blackbox(name, local_files_only=True)`` for the duration of each load. The
fast tests check the schemas and the loading path; the slow ones run DyHPO and DeepPowerLaw
through a real Tuner on the simulator, per blackbox.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from syne_tune.blackbox_repository.blackbox_tabular import BlackboxTabular
from syne_tune.blackbox_repository.conversion_scripts.scripts import (
    fcnet_import,
    nasbench201_import,
    pd1_import,
)
from syne_tune.config_space import config_space_to_json_dict

from benchmarks import synthetic
from benchmarks.blackboxes import (
    REPOSITORY_ENV,
    BlackboxNotAvailableError,
    is_serialized_folder,
    list_tasks,
    load_benchmark,
)
from benchmarks.padded import curve_lengths, last_real_values
from benchmarks.runner import RunSpec, run_dir, run_one, simulator_backend_class
from benchmarks.table import metric_bounds, table_configs

N_CONFIGS = 40
# PD1 task of the end-to-end test: one configuration runs to the end (20 evaluations), every
# other one stops after 2. A run of 3 x 20 = 60 epochs over 30 configurations must then take
# some configuration to the end of its curve before max_t: 29 short trials hold at most one
# epoch each without ending (29) plus 20 for the long one, 49 < 60.
PD1_E2E_TASK, PD1_E2E_MAX_T, PD1_E2E_CONFIGS = "cifar10_wide_resnet_batch_size_256", 20, 30

TABULAR_FILES = {
    "configspace.json", "fidelityspace.json", "hyperparameters.parquet", "metadata.json",
    "objectives_evaluations.npy", "fidelities_values.npy",
}


def _space(config_space: dict) -> dict:
    return config_space_to_json_dict(config_space)


def _pd1_e2e_task() -> BlackboxTabular:
    raw = synthetic.pd1_task_data(PD1_E2E_CONFIGS, PD1_E2E_MAX_T, np.random.RandomState(7), num_empty=1)
    lengths = raw[pd1_import.METRIC_VALID_ERROR].map(lambda c: 0 if c is None else len(c))
    keep_long = int(lengths.idxmax())
    for col in (pd1_import.METRIC_VALID_ERROR, "metric_valid_ce_loss", pd1_import.METRIC_ELAPSED_TIME):
        raw[col] = [c if (c is None or i == keep_long) else c[:2] for i, c in enumerate(raw[col])]
    return pd1_import.convert_task(raw)


@pytest.fixture(scope="module")
def synthetic_repository(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("blackbox-repository")
    synthetic.write_synthetic_blackbox("fcnet", root, num_configs=N_CONFIGS, seed=0)
    synthetic.write_synthetic_blackbox("nasbench201", root, num_configs=N_CONFIGS, seed=1)
    pd1 = synthetic.pd1_blackboxes(num_configs=N_CONFIGS, seed=2)
    pd1[PD1_E2E_TASK] = _pd1_e2e_task()
    synthetic.write_synthetic_blackbox("pd1", root, bb_dict=pd1)
    return root


@pytest.fixture
def repository(synthetic_repository, monkeypatch) -> Path:
    monkeypatch.setenv(REPOSITORY_ENV, str(synthetic_repository))
    return synthetic_repository


# ----- schemas (fast) ---------------------------------------------------------------------------


def test_fcnet_schema(repository):
    assert {p.name for p in (repository / "fcnet").iterdir()} == TABULAR_FILES
    meta = json.loads((repository / "fcnet" / "metadata.json").read_text())
    assert meta["metric_default"] == "metric_valid_loss" and meta["time_attr"] == "hp_epoch"
    assert meta["metric_elapsed_time"] == "metric_elapsed_time" and meta["synthetic"] is True
    assert list_tasks("fcnet") == ["protein_structure", "naval_propulsion"]
    d, bb = load_benchmark("fcnet", task="naval_propulsion")
    assert (d.name, d.metric, d.do_minimize) == ("fcnet", "metric_valid_loss", True)
    assert (d.time_attr, d.max_t) == ("hp_epoch", 100)
    assert d.elapsed_time_attr == "metric_elapsed_time" and d.nan_padded is False
    assert bb.objectives_names == [
        "metric_valid_loss", "metric_train_loss", "metric_final_test_error", "metric_n_params",
        "metric_elapsed_time",
    ]
    assert bb.fidelity_values.tolist() == list(range(1, 101)) and bb.num_seeds == 4
    assert bb.objectives_evaluations.shape == (N_CONFIGS, 4, 100, 5)
    assert bb.objectives_evaluations.dtype == np.float32
    assert _space(bb.configuration_space) == _space(fcnet_import.CONFIGURATION_SPACE)
    assert list(bb.hyperparameters.columns) == list(fcnet_import.CONFIGURATION_SPACE)
    for name, domain in fcnet_import.CONFIGURATION_SPACE.items():
        allowed = list(getattr(domain, "categories", None) or domain.values)
        assert set(bb.hyperparameters[name]) <= set(allowed), name
    y = bb.objectives_evaluations
    assert np.isfinite(y).all()
    # elapsed time linear in the epoch (fcnet_import interpolates the total runtime)
    elapsed = y[..., 4].astype(np.float64)
    np.testing.assert_allclose(elapsed, elapsed[..., -1:] * np.arange(1, 101) / 100, rtol=1e-5)
    # final test error and n_params constant along the curve
    assert (y[..., 2] == y[..., :1, 2]).all() and (y[..., 3] == y[..., :1, 3]).all()


def test_nasbench201_schema(repository):
    assert {p.name for p in (repository / "nasbench201").iterdir()} == TABULAR_FILES
    assert list_tasks("nasbench201") == ["cifar10", "cifar100", "ImageNet16-120"]
    d, bb = load_benchmark("nasbench201", task="cifar100")
    assert (d.metric, d.do_minimize, d.time_attr, d.max_t) == ("metric_valid_error", True, "hp_epoch", 200)
    assert d.elapsed_time_attr == "metric_elapsed_time"
    assert bb.objectives_names == [
        "metric_valid_error", "metric_train_error", "metric_runtime", "metric_elapsed_time",
        "metric_latency", "metric_flops", "metric_params",
    ]
    assert bb.fidelity_values.tolist() == list(range(1, 201)) and bb.num_seeds == 3
    assert list(bb.hyperparameters.columns) == list(nasbench201_import.CONFIG_KEYS)
    for key in nasbench201_import.CONFIG_KEYS:
        assert bb.configuration_space[key].categories == list(synthetic.NB201_OPS)
    y = bb.objectives_evaluations.astype(np.float64)
    # the import imputed the missing (architecture, seed) run: no NaN left
    assert np.isfinite(y).all()
    assert ((y[..., 0] >= 0) & (y[..., 0] <= 1)).all()
    np.testing.assert_allclose(y[..., 3], np.cumsum(y[..., 2], axis=-1), rtol=1e-4)


def test_pd1_schema_and_nan_padding(repository):
    folder = repository / "pd1"
    meta = json.loads((folder / "metadata.json").read_text())
    tasks = list(synthetic.PD1_TASKS) + [PD1_E2E_TASK]
    assert meta["task_names"] == tasks and meta["metric_default"] == "metric_valid_error_rate"
    assert meta["objectives_names"] == [
        "metric_valid_error_rate", "metric_valid_ce_loss", "metric_elapsed_time",
    ]
    per_task = {
        "-hyperparameters.parquet", "-fidelity_space.json", "-objectives_evaluations.npy", "-fidelity_values.npy",
    }
    assert {p.name for p in folder.iterdir()} == {"configspace.json", "metadata.json"} | {
        t + suffix for t in tasks for suffix in per_task
    }
    # the per-task layout is pd1_import's own: the generic tabular reader does not take it
    assert not is_serialized_folder(folder)
    max_t = {**synthetic.PD1_TASKS, PD1_E2E_TASK: PD1_E2E_MAX_T}
    for task in tasks:
        d, bb = load_benchmark("pd1", task=task)
        assert (d.metric, d.do_minimize, d.time_attr) == ("metric_valid_error_rate", True, "global_step")
        assert d.nan_padded is True and d.max_t == max_t[task]
        assert bb.fidelity_values.tolist() == list(range(1, max_t[task] + 1)) and bb.num_seeds == 1
        assert _space(bb.configuration_space) == _space(pd1_import.CONFIGURATION_SPACE)
        y = bb.objectives_evaluations[:, 0].astype(np.float64)  # (configs, steps, objectives)
        finite = np.isfinite(y)
        # padding: each curve is finite on a prefix and NaN after, alike for all objectives
        assert (finite == finite[..., :1]).all()
        lengths = finite[..., 0].sum(axis=1)
        assert (finite[..., 0] == (np.arange(max_t[task])[None, :] < lengths[:, None])).all()
        assert lengths.max() == max_t[task]
        assert (lengths == 0).sum() == 1  # one configuration never evaluated
        assert ((lengths > 0) & (lengths < max_t[task])).sum() >= 5  # runs that ended early
        assert (curve_lengths(bb, d.metric, d.elapsed_time_attr)[:, 0] == lengths).all()


def test_curves_look_like_training(repository):
    tasks = [("fcnet", "protein_structure"), ("nasbench201", "cifar10"), ("pd1", "imagenet_resnet50_batch_size_512")]
    for name, task in tasks:
        d, bb = load_benchmark(name, task=task)
        y = bb.objectives_evaluations[..., bb.objectives_names.index(d.metric)].astype(np.float64)
        first, last = y[:, :, 0], last_real_values(y)
        ok = np.isfinite(last)
        # they learn: nearly every run ends better than it started, the best ones far better
        assert np.mean(last[ok] < first[ok]) > 0.9 and last[ok].min() < 0.6 * np.median(first[ok]), name
        assert 0.05 < np.nanmean(np.diff(y, axis=-1) > 0) < 0.6, name  # noisy, not monotone
        # crossings: rank at 10 % of the curve says little about the rank at the end
        early = y[:, 0, max(1, d.max_t // 10)]
        both = np.isfinite(early) & np.isfinite(last[:, 0])
        rank_early, rank_last = (np.argsort(np.argsort(v[both])) for v in (early, last[:, 0]))
        assert np.corrcoef(rank_early, rank_last)[0, 1] < 0.95, name
        e, f = early[both], last[both, 0]
        swapped = np.sign(e[:, None] - e[None, :]) * np.sign(f[:, None] - f[None, :]) < 0
        assert swapped.sum() >= 10, name
        # plateaus: some curves barely move over their first 5 % while others drop
        head = max(3, d.max_t // 20)
        move = np.abs(y[:, 0, head] - y[:, 0, 0]) / (np.nanmax(y) - np.nanmin(y))
        assert np.nanmin(move) < 0.02 < np.nanmax(move), name
        if bb.num_seeds > 1:
            assert np.abs(y[:, 0] - y[:, 1]).mean() > 0, name  # seeds differ


def test_loading_leaves_syne_tune_repository_alone(repository):
    from syne_tune.blackbox_repository import repository as st_repository
    from syne_tune.blackbox_repository.conversion_scripts import utils as st_utils

    before = (st_repository.repository_path, st_utils.repository_path)
    d, _ = load_benchmark("nasbench201", task="cifar10")
    assert d.source == "nasbench201"
    assert (st_repository.repository_path, st_utils.repository_path) == before
    assert before[0] != repository


def test_missing_blackbox_offline_fails_at_once_with_instruction(tmp_path, monkeypatch):
    monkeypatch.setenv(REPOSITORY_ENV, str(tmp_path))
    for name in ("fcnet", "nasbench201", "pd1"):
        t0 = time.perf_counter()
        with pytest.raises(BlackboxNotAvailableError) as info:
            load_benchmark(name)
        assert time.perf_counter() - t0 < 5.0
        msg = str(info.value)
        assert f"load_blackbox('{name}')" in msg and "with internet access" in msg
        assert str(tmp_path / name) in msg and REPOSITORY_ENV in msg


def test_generator_never_overwrites_a_real_blackbox(tmp_path):
    real = tmp_path / "fcnet"
    real.mkdir()
    (real / "metadata.json").write_text(json.dumps({"task_names": ["protein_structure"]}))
    with pytest.raises(FileExistsError, match=re.escape("not written by benchmarks.synthetic")):
        synthetic.write_synthetic_blackbox("fcnet", tmp_path, num_configs=5)
    assert json.loads((real / "metadata.json").read_text()) == {"task_names": ["protein_structure"]}
    with pytest.raises(ValueError, match="name must be one of"):
        synthetic.write_synthetic_blackbox("lcbench", tmp_path)
    with pytest.raises(ValueError, match="num_configs must be an integer"):
        synthetic.fcnet_blackboxes(num_configs=1)
    assert synthetic.main(["pd1", "--repository", str(tmp_path), "--num-configs", "8"]) == 0
    assert synthetic.main(["fcnet", "--repository", str(tmp_path)]) == 2  # the "real" one


def test_metadata_key_of_syne_tune_scripts_is_read(tmp_path):
    # Syne Tune's scripts write the default metric under "metric_default"
    synthetic.write_synthetic_blackbox("nasbench201", tmp_path, num_configs=6)
    meta_file = tmp_path / "nasbench201" / "metadata.json"
    meta = json.loads(meta_file.read_text())
    meta["metric_default"] = "metric_train_error"
    meta_file.write_text(json.dumps(meta))
    d, _ = load_benchmark(tmp_path / "nasbench201", task="cifar10")
    assert d.metric == "metric_train_error" and d.do_minimize is True and d.max_t == 200


# ----- NaN padding, seeds (fast) ----------------------------------------------------------------


def test_padded_backend_ends_each_curve_at_its_last_real_step(repository):
    d, bb = load_benchmark("pd1", task="lm1b_transformer_batch_size_2048")
    lengths = curve_lengths(bb, d.metric, d.elapsed_time_attr)[:, 0]
    backend_class = simulator_backend_class(padded_metric=d.metric)
    backend = backend_class(blackbox=bb, elapsed_time_attr=d.elapsed_time_attr, seed=0)
    configs = table_configs(bb)
    for i, config in enumerate(configs):
        if lengths[i] == 0:
            with pytest.raises(ValueError, match="no real step"):
                backend.config_objectives(config, seed=0)
            continue
        results = backend.config_objectives(config, seed=0)
        assert [r["global_step"] for r in results] == list(range(1, lengths[i] + 1))
        assert all(np.isfinite(r[d.metric]) and np.isfinite(r[d.elapsed_time_attr]) for r in results)
    # Syne Tune's backend reports the padding as NaN: what the freeze-thaw schedulers read as divergence
    plain = simulator_backend_class()(blackbox=bb, elapsed_time_attr=d.elapsed_time_attr, seed=0)
    short = int(np.flatnonzero((lengths > 0) & (lengths < d.max_t))[0])
    assert np.isnan(plain.config_objectives(configs[short], seed=0)[-1][d.metric])


def _tiny_padded(err: np.ndarray, time_nan: np.ndarray) -> BlackboxTabular:
    from syne_tune.config_space import randint, uniform

    # rows {"x": 0.1, "y": 1}, {"x": 0.2, "y": 2}, ... (two columns: Syne Tune's row lookup
    # fails on a single one)
    steps, rows = err.shape[1], np.arange(1, len(err) + 1)
    times = np.where(time_nan, np.nan, np.arange(1.0, steps + 1))
    return BlackboxTabular(
        hyperparameters=pd.DataFrame({"x": rows / 10, "y": rows}),
        configuration_space={"x": uniform(0, 1), "y": randint(1, len(err))},
        fidelity_space={"global_step": randint(1, steps)},
        objectives_evaluations=np.stack([err, times], axis=-1)[:, None], objectives_names=["error", "time"],
    )


def test_padded_backend_keeps_data_nan_and_ends_resumed_trials_at_once():
    nan = np.nan
    # A to the end; B ends after 2 steps; C has a NaN error at step 2 (data: its time is real)
    # and ends after 3
    err = np.array([[0.8, 0.5, 0.3, 0.2], [0.95, 0.9, nan, nan], [0.9, nan, 0.5, nan]])
    bb = _tiny_padded(err, time_nan=np.isnan(err) & ~np.eye(3, 4, k=-1, dtype=bool))
    backend = simulator_backend_class(padded_metric="error")(blackbox=bb, elapsed_time_attr="time", seed=0)
    rows = [{"x": y / 10, "y": y} for y in (1, 2, 3)]
    steps = [[r["global_step"] for r in backend.config_objectives(row, seed=0)] for row in rows]
    assert steps == [[1, 2, 3, 4], [1, 2], [1, 2, 3]]
    assert np.isnan(backend.config_objectives(rows[2], seed=0)[1]["error"])  # reported as recorded
    # a job told to stop at step 2 (max_resource_attr, how our schedulers run segments) reports
    # C's NaN at step 2: the end of a segment is not the end of the curve
    segments = simulator_backend_class(padded_metric="error")(
        blackbox=bb, elapsed_time_attr="time", seed=0, max_resource_attr="segment_end"
    )
    segment = segments.config_objectives({**rows[2], "segment_end": 2}, seed=0)
    assert [r["global_step"] for r in segment] == [1, 2] and np.isnan(segment[1]["error"])
    backend.time_keeper.start_of_time()  # as the Tuner does before starting trials
    trial = backend.start_trial(rows[1])
    status, results = backend._run_job_and_collect_results(trial.trial_id)
    assert status == "Completed" and [r["global_step"] for r in results] == [1, 2]
    backend._resource_paused_for_trial[trial.trial_id] = 1  # paused after step 1: step 2 is left
    assert [r["global_step"] for r in backend._run_job_and_collect_results(trial.trial_id)[1]] == [2]
    backend._resource_paused_for_trial[trial.trial_id] = 2  # paused at its last real step
    assert backend._run_job_and_collect_results(trial.trial_id) == ("Completed", [])


def test_metric_bounds_of_padded_curves_use_each_run_s_last_real_value():
    # three runs: A to the end (final 0.2), B stopped after 2 steps at 0.9, C after 3 at 0.5
    nan = np.nan
    err = np.array([[0.8, 0.5, 0.3, 0.2], [0.95, 0.9, nan, nan], [0.9, 0.7, 0.5, nan]])
    bb = _tiny_padded(err, time_nan=np.isnan(err))
    padded = metric_bounds(bb, "error", do_minimize=True, worst_quantile=1.0, padded=True)
    assert (padded.best_final, padded.worst_final, padded.worst) == (0.2, 0.9, 0.9)
    # at the maximum fidelity only A has a value: worst = best = 0.2, no range to normalise by
    plain = metric_bounds(bb, "error", do_minimize=True, worst_quantile=1.0)
    assert (plain.best_final, plain.worst_final, plain.worst) == (0.2, 0.2, 0.2)
    assert padded.best_any == plain.best_any == 0.2 and padded.n_nonfinite == 3


@pytest.mark.timeout(60)  # before the fix, the padding's NaN elapsed time stalled the simulator for good
def test_pd1_run_ends_each_trial_at_its_last_real_step(repository, tmp_path):
    # RandomSearch never pauses: each trial trains until its job ends by itself
    spec = RunSpec("RandomSearch", "pd1", PD1_E2E_TASK, seed=0, budget_epochs=40)
    summary = run_one(spec, tmp_path)
    d, bb = load_benchmark("pd1", task=PD1_E2E_TASK)
    lengths = curve_lengths(bb, d.metric, d.elapsed_time_attr)[:, 0]
    df = pd.read_csv(run_dir(spec, tmp_path) / "results.csv.gz")
    assert np.isfinite(df[d.metric]).all() and np.isfinite(df[d.elapsed_time_attr]).all()
    last = df.groupby("trial_id").tail(1)
    short = 0
    for _, rec in last.iterrows():
        n = lengths[_table_row(bb, rec)]
        assert n > 0  # the row without any evaluation is never started
        if rec["trial_id"] != last["trial_id"].max():  # the last trial may be cut by the budget
            assert rec[d.time_attr] == n and rec["st_status"] == "Completed", dict(rec)
            short += n < d.max_t
    assert short >= 5 and summary["n_epochs_simulated"] == 40
    # regret is normalised by the runs' final values, not by the one curve reaching max_t
    assert summary["bounds"]["worst"] > summary["bounds"]["best_final"]


def _table_row(bb: BlackboxTabular, result: pd.Series) -> int:
    """Index of the table row a result (a row of the runner's results.csv.gz) was read from."""
    hps = bb.hyperparameters
    match = np.ones(len(hps), dtype=bool)
    for k in hps.columns:
        v = result[f"config_{k}"]
        if isinstance(v, str):
            match &= (hps[k] == v).to_numpy()
        else:
            match &= np.isclose(hps[k].to_numpy(float), float(v), rtol=1e-12)
    (rows,) = np.nonzero(match)
    assert len(rows) == 1, (dict(result), rows)
    return int(rows[0])


def _check_values_read_from_seed_slice(df: pd.DataFrame, bb: BlackboxTabular, d, seed_slice: int) -> None:
    """Every reported value is the table's at (row, seed_slice, epoch), and not any other slice's."""
    j = bb.objectives_names.index(d.metric)
    for _, rec in df.iterrows():
        i = _table_row(bb, rec)
        table = bb.objectives_evaluations[i, :, int(rec[d.time_attr]) - 1, j]
        assert rec[d.metric] == pytest.approx(float(table[seed_slice]), rel=1e-6)
        others = np.delete(table, seed_slice)
        assert not np.isclose(others, rec[d.metric], rtol=1e-9).any()


@pytest.mark.parametrize("name, task, seed", [
    ("fcnet", "protein_structure", 0), ("fcnet", "protein_structure", 5), ("nasbench201", "cifar10", 2),
])
def test_run_reads_the_seed_slice_of_its_seed(repository, tmp_path, name, task, seed):
    spec = RunSpec("RandomSearch", name, task, seed=seed, budget_epochs=30)
    summary = run_one(spec, tmp_path)
    d, bb = load_benchmark(name, task=task)
    df = pd.read_csv(run_dir(spec, tmp_path) / "results.csv.gz")
    assert len(df) == 30 and summary["definition"]["max_t"] == d.max_t
    _check_values_read_from_seed_slice(df, bb, d, seed % bb.num_seeds)


# ----- command line (fast) ----------------------------------------------------------------------


def test_cli_runs_blackbox_by_name_with_budget_scaled_by_max_t(repository, tmp_path, monkeypatch, capsys):
    from benchmarks.run_benchmarks import main

    monkeypatch.delenv(REPOSITORY_ENV)  # --repository sets it
    argv = ["--blackbox", "pd1", "--repository", str(repository), "--tasks", "lm1b_transformer_batch_size_2048",
            PD1_E2E_TASK, "--methods", "RandomSearch", "--seeds", "0", "--budget-factor", "1.5",
            "--n-jobs", "1", "--results-dir", str(tmp_path / "res")]
    assert main(argv) == 0
    runs = sorted(p.relative_to(tmp_path / "res").as_posix() for p in (tmp_path / "res").rglob("run.json"))
    assert runs == [
        f"pd1/{PD1_E2E_TASK}/RandomSearch/seed0-budget30-w1/run.json",  # 1.5 x 20
        "pd1/lm1b_transformer_batch_size_2048/RandomSearch/seed0-budget38-w1/run.json",  # 1.5 x 25
    ]
    capsys.readouterr()
    for bad, expected in [
        (["--tasks", "no_such_task"], "--tasks ['no_such_task']: not a task"),
        (["--budget-factor", "0"], "--budget-factor must be > 0, got 0.0"),
        (["--repository", str(tmp_path / "nowhere")], "not a folder"),
    ]:
        base = ["--blackbox", "pd1", "--repository", str(repository), "--methods", "RandomSearch"]
        assert main(base + bad) == 2
        assert expected in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--blackbox", "yahpo"])  # argparse: invalid choice
    assert main(["--blackbox", "fcnet", "--repository", str(tmp_path), "--methods", "RandomSearch"]) == 2
    assert "load_blackbox('fcnet')" in capsys.readouterr().err


# ----- end to end through a real Tuner (slow) -----------------------------------------------------

E2E = [
    # blackbox, task, run seed (seed slice = seed % num_seeds), budget (1.5-3 x max_t: enough for
    # many pauses and resumes; the surrogate fits make longer runs cost tens of seconds)
    ("fcnet", "protein_structure", 1, 150),
    ("nasbench201", "cifar10", 5, 300),
    ("pd1", PD1_E2E_TASK, 0, 3 * PD1_E2E_MAX_T),
]


@pytest.mark.slow
@pytest.mark.timeout(300)  # 1-7 s each here; the margin is for loaded CI machines
@pytest.mark.parametrize("method", ["DyHPO", "DeepPowerLaw"])
@pytest.mark.parametrize("name, task, seed, budget", E2E)
def test_freeze_thaw_end_to_end(repository, tmp_path, method, name, task, seed, budget):
    spec = RunSpec(method, name, task, seed=seed, budget_epochs=budget)
    summary = run_one(spec, tmp_path)
    d, bb = load_benchmark(name, task=task)
    df = pd.read_csv(run_dir(spec, tmp_path) / "results.csv.gz")
    meta = summary["scheduler_metadata"]
    assert meta["metric_names"] == [d.metric] and meta["metric_mode"] == "min"
    assert meta["time_attr"] == d.time_attr
    assert meta["max_t"] == d.max_t == {"fcnet": 100, "nasbench201": 200, "pd1": PD1_E2E_MAX_T}[name]
    assert meta["num_fallbacks"] == 0
    assert summary["n_epochs_simulated"] >= budget and summary["n_trials"] >= 3
    lengths = curve_lengths(bb, d.metric, d.elapsed_time_attr)[:, seed % bb.num_seeds]
    ended_early = resumed = 0
    for tid, g in df.groupby("trial_id", sort=False):
        epochs = g[d.time_attr].astype(int).tolist()
        # contiguous from 1: a resumed trial goes on after the step it was paused at
        assert epochs == list(range(1, len(epochs) + 1)), f"trial {tid}: {epochs}"
        resumed += "PAUSE" in g["st_decision"].tolist()[:-1]
        row = _table_row(bb, g.iloc[0])
        assert epochs[-1] <= lengths[row] <= d.max_t
        ended_early += epochs[-1] == lengths[row] < d.max_t
    assert resumed >= 1, "no trial was paused and resumed"
    assert np.isfinite(df[d.metric]).all() and np.isfinite(df[d.elapsed_time_attr]).all()
    _check_values_read_from_seed_slice(df, bb, d, seed % bb.num_seeds)
    if name == "pd1":
        # no configuration is mistaken for diverged: its run ended, it did not fail
        assert "diverged" not in meta["status_counts"], meta["status_counts"]
        assert ended_early >= 1 and meta["status_counts"].get("completed", 0) >= 1
        assert (df["st_status"] == "Completed").sum() >= 1
        assert summary["bounds"]["worst"] > summary["bounds"]["best_final"]
