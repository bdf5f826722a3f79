import json
import time

import numpy as np
import pandas as pd
import pytest
from syne_tune.blackbox_repository.blackbox_tabular import BlackboxTabular, serialize
from syne_tune.config_space import loguniform, randint

from benchmarks import blackboxes
from benchmarks.blackboxes import (
    BlackboxNotAvailableError,
    find_serialized_folders,
    infer_do_minimize,
    load_benchmark,
)
from benchmarks.runner import RESULTS_FILE, RUN_FILE, RunSpec, run_dir, run_one
from benchmarks.table import TableRestricted, metric_bounds, table_configs

N_CONFIGS, N_FID = 12, 5


def _tiny_blackbox() -> BlackboxTabular:
    rng = np.random.RandomState(0)
    hps = pd.DataFrame(
        {
            "lr": np.exp(rng.uniform(np.log(1e-4), 0.0, N_CONFIGS)),
            "units": rng.permutation(np.arange(1, N_CONFIGS + 1)).astype(np.int64),
        }
    )
    base = np.arange(1, N_CONFIGS + 1, dtype=np.float64)  # final loss of config i is i + 1
    loss = base[:, None] + 0.1 * (N_FID - 1 - np.arange(N_FID))[None, :]
    loss[10, 3:] = np.nan  # diverged curve
    loss[11, -1] = 1e10  # exploding loss
    times = np.tile(np.arange(1, N_FID + 1, dtype=np.float64), (N_CONFIGS, 1))
    obj = np.stack([loss, times], axis=-1)[:, None, :, :]  # (configs, seeds, fid, obj)
    return BlackboxTabular(
        hyperparameters=hps,
        configuration_space={"lr": loguniform(1e-4, 1.0), "units": randint(1, N_CONFIGS)},
        fidelity_space={"step": randint(1, N_FID)},
        objectives_evaluations=obj,
        objectives_names=["valid_loss", "time"],
    )


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("bb") / "tinybench"
    bb = _tiny_blackbox()
    serialize(
        {"taskA": bb, "taskB": bb},
        str(path),
        metadata={"default_metric": "valid_loss", "time_attr": "step", "metric_elapsed_time": "time"},
    )
    return path


def test_load_definition_from_metadata(tiny_folder):
    d, bb = load_benchmark(tiny_folder, task="taskB")
    assert d.name == "tinybench"
    assert d.task == "taskB"
    assert d.metric == "valid_loss" and d.do_minimize is True
    assert d.time_attr == "step" and d.max_t == N_FID
    assert d.elapsed_time_attr == "time"
    assert bb.objectives_evaluations.shape == (N_CONFIGS, 1, N_FID, 2)
    # overrides and errors
    d2, _ = load_benchmark(tiny_folder, task="taskA", metric="time", do_minimize=False)
    assert d2.metric == "time" and d2.do_minimize is False
    with pytest.raises(KeyError):
        load_benchmark(tiny_folder, task="nope")
    with pytest.raises(ValueError):
        load_benchmark(tiny_folder)  # two tasks, none chosen
    assert find_serialized_folders(tiny_folder.parent) == [
        (str(tiny_folder), "taskA"),
        (str(tiny_folder), "taskB"),
    ]


def test_infer_direction():
    assert infer_do_minimize("val_accuracy") is False
    assert infer_do_minimize("metric_valid_error") is True
    assert infer_do_minimize("valid_loss") is True
    with pytest.raises(ValueError):
        infer_do_minimize("foo")


def test_missing_repository_blackbox_raises_quickly(tmp_path, monkeypatch):
    monkeypatch.setattr(blackboxes, "repository_cache_path", lambda name: tmp_path / name)
    blackboxes._CACHE.pop("fcnet", None)
    t0 = time.perf_counter()
    with pytest.raises(BlackboxNotAvailableError, match="not in the local cache"):
        load_benchmark("fcnet", task="protein_structure")
    assert time.perf_counter() - t0 < 5.0
    with pytest.raises(BlackboxNotAvailableError):
        load_benchmark(str(tmp_path / "no_such_folder"))


def test_table_configs_exact_match_and_bounds(tiny_folder):
    _, bb = load_benchmark(tiny_folder, task="taskA")
    configs = table_configs(bb)
    assert len(configs) == N_CONFIGS
    assert type(configs[0]["lr"]) is float and type(configs[0]["units"]) is int
    for i, c in enumerate(configs):
        # the simulator's exact-match lookup finds each row
        res = bb.objective_function(c, fidelity={"step": N_FID}, seed=0)
        expected = bb.objectives_evaluations[i, 0, -1, 0]
        assert res["valid_loss"] == expected or (np.isnan(expected) and np.isnan(res["valid_loss"]))
    b = metric_bounds(bb, "valid_loss", do_minimize=True, worst_quantile=0.9)
    assert b.best_any == 1.0 and b.best_final == 1.0
    assert b.worst_any == 1e10 and b.worst_final == 1e10
    # finite final values 1..10 and 1e10 (config 10 diverged): 0.9 quantile = 10
    assert b.worst == pytest.approx(10.0)
    assert b.n_nonfinite == 2
    # maximisation orientation flips best/worst
    bm = metric_bounds(bb, "valid_loss", do_minimize=False, worst_quantile=1.0)
    assert bm.best_any == 1e10 and bm.worst == 1.0


def test_table_restricted_maps_to_unused_rows(tiny_folder):
    from syne_tune.optimizer.baselines import RandomSearch

    _, bb = load_benchmark(tiny_folder, task="taskA")
    configs = table_configs(bb)
    sched = TableRestricted(
        RandomSearch(bb.configuration_space, metrics=["valid_loss"], random_seed=1), configs
    )
    seen = []
    for _ in range(N_CONFIGS):
        s = sched.suggest()
        assert s.config in configs
        seen.append(configs.index(s.config))
    assert sorted(seen) == list(range(N_CONFIGS))  # each row exactly once
    assert sched.suggest() is None  # table exhausted


def _first_pick_counts(sampling: str, n_seeds: int = 200) -> np.ndarray:
    """How often each row of a 1-d table is the first suggestion: 9 rows packed in
    [0.9, 1.0], one isolated row at 0.05, random draws uniform on [0, 1]."""
    from syne_tune.config_space import uniform
    from syne_tune.optimizer.baselines import RandomSearch

    space = {"x": uniform(0.0, 1.0)}
    configs = [{"x": 0.05}] + [{"x": 0.9 + 0.0125 * i} for i in range(9)]
    counts = np.zeros(len(configs), dtype=int)
    for seed in range(n_seeds):
        sched = TableRestricted(RandomSearch(space, metrics=["y"], random_seed=seed), configs, sampling=sampling)
        counts[configs.index(sched.suggest().config)] += 1
    return counts


def test_table_restricted_uniform_sampling_is_unbiased_nearest_is_not():
    nearest = _first_pick_counts("nearest")
    uniform = _first_pick_counts("uniform")
    # the isolated row owns ~0.47 of [0, 1] under nearest mapping, 1/10 of the rows uniformly
    assert nearest[0] / nearest.sum() > 0.35
    assert 0.03 < uniform[0] / uniform.sum() < 0.2
    assert (uniform > 0).all()


def test_table_restricted_uniform_visits_each_row_once_and_is_seeded(tiny_folder):
    from syne_tune.optimizer.baselines import RandomSearch

    _, bb = load_benchmark(tiny_folder, task="taskA")
    configs = table_configs(bb)

    def order(seed):
        sched = TableRestricted(
            RandomSearch(bb.configuration_space, metrics=["valid_loss"], random_seed=seed), configs,
            sampling="uniform",
        )
        out = [configs.index(sched.suggest().config) for _ in range(N_CONFIGS)]
        assert sched.suggest() is None
        return out

    assert sorted(order(3)) == list(range(N_CONFIGS))
    assert order(3) == order(3) and order(3) != order(4)
    with pytest.raises(ValueError, match="sampling"):
        TableRestricted(RandomSearch(bb.configuration_space, metrics=["valid_loss"]), configs, sampling="knn")


@pytest.mark.slow  # starts a Tuner, Ray or a process
@pytest.mark.parametrize("method", ["RandomSearch", "ASHA"])
def test_end_to_end_run(tiny_folder, tmp_path, method):
    spec = RunSpec(method, str(tiny_folder), "taskA", seed=0, budget_epochs=20, n_workers=1)
    summary = run_one(spec, tmp_path)
    out = run_dir(spec, tmp_path)
    assert (out / RESULTS_FILE).exists() and (out / RUN_FILE).exists()
    df = pd.read_csv(out / RESULTS_FILE)
    assert summary["n_epochs_simulated"] == 20
    assert len(df) == 20 and summary["n_results"] == 20
    assert summary["scheduler_seconds"] > 0
    assert set(summary["regret"]) == {"0.25", "0.5", "1.0"}
    # every evaluated config is a table row
    _, bb = load_benchmark(tiny_folder, task="taskA")
    rows = {(round(c["lr"], 12), c["units"]) for c in table_configs(bb)}
    evaluated = {(round(r.config_lr, 12), int(r.config_units)) for r in df.itertuples()}
    assert evaluated <= rows
    if method == "RandomSearch":
        # 20 epochs = 4 full trials of 5 epochs
        assert summary["n_trials"] == 4 and df.groupby("trial_id").size().eq(N_FID).all()
    # resumable: the second call reads the stored summary
    mtime = (out / RUN_FILE).stat().st_mtime
    again = run_one(spec, tmp_path)
    assert (out / RUN_FILE).stat().st_mtime == mtime and again["regret"] == summary["regret"]
    assert not list(out.glob("st-*"))  # Syne Tune's own output folder removed


@pytest.mark.slow  # starts a Tuner, Ray or a process
def test_random_search_exhausts_table(tiny_folder, tmp_path):
    spec = RunSpec("RandomSearch", str(tiny_folder), "taskB", seed=3, budget_epochs=100)
    summary = run_one(spec, tmp_path)
    # 12 rows x 5 epochs, then no unused row is left and tuning ends
    assert summary["n_results"] == N_CONFIGS * N_FID
    assert summary["n_trials"] == N_CONFIGS
    # best final loss 1.0 is found: regret 0 at 100 % budget (worst = 10)
    assert summary["regret"]["1.0"] == 0.0
    assert json.loads((run_dir(spec, tmp_path) / RUN_FILE).read_text())["bounds"]["worst"] == 10.0


@pytest.mark.slow  # starts a Tuner, Ray or a process
def test_report_from_results_folder(tiny_folder, tmp_path):
    from benchmarks.report import load_runs, long_table, make_report, summary_table

    for method in ("RandomSearch", "ASHA"):
        run_one(RunSpec(method, str(tiny_folder), "taskA", 0, 20), tmp_path)
    runs = load_runs(tmp_path)
    assert sorted(r.summary["method"] for r in runs) == ["ASHA", "RandomSearch"]
    table = summary_table(long_table(runs)).set_index("method")
    assert table.loc["RandomSearch", "speed-up vs RS"] == 1.0
    assert table.loc["RandomSearch", "runs"] == 1
    # two methods ranked per budget point: ranks average to 1.5
    assert table["avg rank"].mean() == pytest.approx(1.5)
    rs = next(r for r in runs if r.summary["method"] == "RandomSearch")
    assert table.loc["RandomSearch", "regret@100%"] == pytest.approx(rs.summary["regret"]["1.0"])
    md = make_report(tmp_path, tmp_path / "report")
    assert "| tinybench | 1 | RandomSearch | 1 |" in md  # benchmark | n_workers | method | runs
    assert (tmp_path / "report" / "summary.md").exists()
    assert (tmp_path / "report" / "regret_tinybench.png").stat().st_size > 1000
