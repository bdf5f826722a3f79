"""Grid progress: runs weighted by expected cost, library warnings routed to a log."""

import io
import json
import logging
import warnings
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import pytest
from conftest import data_folder

from benchmarks.progress import (
    RUN_OVERHEAD_SECONDS,
    UNKNOWN_SECONDS_PER_EPOCH,
    WARNINGS_LOG,
    GridProgress,
    expected_run_seconds,
    learned_seconds_per_epoch,
    prior_seconds_per_epoch,
    route_worker_output,
    warnings_to_log,
)
from benchmarks.runner import METHODS, RUN_FILE, RunSpec, run_grid


def _spec(method, budget=1000, seed=0):
    return RunSpec(method, "src", "task", seed, budget)


def test_prior_puts_model_based_methods_far_above_cheap_ones():
    rs, asha = prior_seconds_per_epoch("RandomSearch"), prior_seconds_per_epoch("ASHA")
    bohb, dy = prior_seconds_per_epoch("BOHB"), prior_seconds_per_epoch("DyHPO-no-completion")
    dpl = prior_seconds_per_epoch("DeepPowerLaw-no-completion")
    assert max(rs, asha) * 5 <= bohb and bohb * 2 <= min(dy, dpl)
    assert prior_seconds_per_epoch("SomethingNew") == UNKNOWN_SECONDS_PER_EPOCH
    assert expected_run_seconds(_spec("ASHA", 500)) == pytest.approx(
        RUN_OVERHEAD_SECONDS + 500 * prior_seconds_per_epoch("ASHA")
    )


def _finished_run(root, method, seed, wall, epochs):
    folder = root / "bench" / "task" / method / f"seed{seed}-budget{epochs}-w1"
    folder.mkdir(parents=True)
    (folder / RUN_FILE).write_text(json.dumps(
        {"method": method, "wall_seconds": wall, "n_epochs_simulated": epochs}
    ))


def test_rates_learned_from_finished_runs(tmp_path):
    _finished_run(tmp_path, "DyHPO", 0, 30.0, 1000)
    _finished_run(tmp_path, "DyHPO", 1, 50.0, 1000)
    _finished_run(tmp_path, "DyHPO", 2, 400.0, 1000)  # an outlier: the median ignores it
    _finished_run(tmp_path, "ASHA", 0, 1.0, 100)
    (tmp_path / "bench" / "task" / "ASHA" / "broken").mkdir()
    (tmp_path / "bench" / "task" / "ASHA" / "broken" / RUN_FILE).write_text("{")
    rates = learned_seconds_per_epoch(tmp_path)
    assert rates == pytest.approx({"DyHPO": 0.05, "ASHA": 0.01})
    assert expected_run_seconds(_spec("DyHPO", 200), rates) == pytest.approx(
        RUN_OVERHEAD_SECONDS + 10.0
    )
    # no finished BOHB run: the prior
    assert expected_run_seconds(_spec("BOHB", 200), rates) == pytest.approx(
        RUN_OVERHEAD_SECONDS + 200 * prior_seconds_per_epoch("BOHB")
    )


def test_bar_advances_by_expected_cost(tmp_path):
    specs = [_spec("RandomSearch"), _spec("DyHPO"), _spec("RandomSearch", seed=1)]
    progress = GridProgress(specs, tmp_path, disable=True)
    cheap, dear = progress.weights[0], progress.weights[1]
    assert progress.bar.total == pytest.approx(2 * cheap + dear) and dear > 10 * cheap
    progress.finished(specs[1])
    assert progress.expected_seconds_done == pytest.approx(dear) and progress.num_done == 1
    progress.close()


@pytest.fixture
def terminal():
    """A plain stream handler on the root logger, as ``logging.basicConfig()`` (Syne Tune's
    import) adds on the terminal; here its stream is a buffer."""
    root = logging.getLogger()
    handler = logging.StreamHandler(io.StringIO())
    root.addHandler(handler)
    yield handler.stream
    root.removeHandler(handler)


def test_warnings_go_to_the_log_not_stderr(tmp_path, capsys, terminal):
    log = tmp_path / WARNINGS_LOG
    with warnings_to_log(log):
        warnings.warn("pandas says: inplace is deprecated", FutureWarning, stacklevel=2)
        logging.getLogger("syne_dyhpo.core.trials").warning("trial_id 3: NaN treated as diverged")
    assert "inplace is deprecated" in log.read_text()
    assert "syne_dyhpo.core.trials WARNING: trial_id 3: NaN treated as diverged" in log.read_text()
    assert "inplace is deprecated" not in capsys.readouterr().err
    assert terminal.getvalue() == ""
    # afterwards log records reach the terminal again
    logging.getLogger("syne_dyhpo.core.trials").warning("on the terminal again")
    assert terminal.getvalue() == "on the terminal again\n"
    assert "on the terminal again" not in log.read_text()
    # afterwards warnings are shown as before
    with pytest.warns(FutureWarning):
        warnings.warn("shown again", FutureWarning, stacklevel=2)
    assert "shown again" not in log.read_text()


@pytest.mark.slow  # starts a Tuner, Ray or a process
def test_spawned_worker_routes_warnings_to_the_log(tmp_path, capfd):
    log = tmp_path / WARNINGS_LOG
    with ProcessPoolExecutor(
        1, mp_context=get_context("spawn"), initializer=route_worker_output, initargs=(str(log),)
    ) as ex:
        ex.submit(warnings.warn, "fastparquet engine is deprecated", FutureWarning).result()
    assert "fastparquet engine is deprecated" in log.read_text()
    assert "fastparquet engine is deprecated" not in capfd.readouterr().err


def test_worker_routing_removes_the_terminal_handlers(tmp_path, terminal):
    log = tmp_path / WARNINGS_LOG
    root, warnings_logger = logging.getLogger(), logging.getLogger("py.warnings")
    saved = list(root.handlers), list(warnings_logger.handlers), warnings_logger.propagate
    try:
        route_worker_output(str(log))
        logging.getLogger("syne_dyhpo.core.trials").warning("trial_id 4: NaN treated as diverged")
    finally:
        for h in set(root.handlers) - set(saved[0]):
            root.removeHandler(h)
            h.close()
        for h in set(warnings_logger.handlers) - set(saved[1]):
            warnings_logger.removeHandler(h)
            h.close()
        for h in saved[0]:
            if h not in root.handlers:
                root.addHandler(h)
        warnings_logger.propagate = saved[2]
        logging.captureWarnings(False)
    assert "NaN treated as diverged" in log.read_text() and terminal.getvalue() == ""


@pytest.mark.slow  # starts a Tuner, Ray or a process
def test_run_grid_keeps_warnings_out_of_the_terminal(tmp_path, capfd, monkeypatch):
    def noisy(d, cs, configs, seed):
        warnings.warn("a library deprecation", FutureWarning, stacklevel=2)
        return METHODS["RandomSearch"](d, cs, configs, seed)

    monkeypatch.setitem(METHODS, "Noisy", noisy)
    spec = RunSpec("Noisy", str(data_folder("lcbench")), "Australian", 0, 10)
    done, errors = run_grid([spec], tmp_path, n_jobs=1)
    assert not errors and len(done) == 1 and done[0]["n_results"] >= 10
    err = capfd.readouterr().err
    assert "a library deprecation" not in err
    assert "runs 1/1 100%" in err  # the bar counts runs and shows its progress
    assert "a library deprecation" in (tmp_path / WARNINGS_LOG).read_text()
