import numpy as np
import pandas as pd
import pytest

from benchmarks.metrics import (
    average_ranks,
    budget_use_at_fractions,
    first_epoch_reaching,
    incumbent_trajectory,
    normalized_regret,
    regret_at_fractions,
    speedup_vs_random,
)


def _run(values, times=None):
    times = times if times is not None else list(range(1, len(values) + 1))
    return pd.DataFrame(
        {"trial_id": 0, "loss": values, "st_tuner_time": times}
    )


def test_incumbent_ignores_nan_and_inf_minimize():
    traj = incumbent_trajectory(_run([np.nan, 5.0, np.inf, 3.0, 4.0, -np.inf, 1.0]), "loss", True)
    inc = traj["incumbent"].to_numpy()
    assert np.isnan(inc[0])  # nothing finite seen yet
    np.testing.assert_array_equal(inc[1:], [5.0, 5.0, 3.0, 3.0, 3.0, 1.0])
    np.testing.assert_array_equal(traj["epochs"], np.arange(1, 8))


def test_incumbent_maximize_and_sorted_by_time():
    # rows arrive out of time order: the trajectory follows simulated time
    df = _run([70.0, 90.0, 80.0], times=[3.0, 1.0, 2.0])
    traj = incumbent_trajectory(df, "loss", do_minimize=False)
    np.testing.assert_array_equal(traj["value"], [90.0, 80.0, 70.0])
    np.testing.assert_array_equal(traj["incumbent"], [90.0, 90.0, 90.0])


def test_normalized_regret_both_directions_and_clipping():
    # minimise: best 1, worst 11
    assert normalized_regret(3.5, best=1.0, worst=11.0) == pytest.approx(0.25)
    # maximise accuracy: best 90, worst 10 -> (90 - 70) / 80
    assert normalized_regret(70.0, best=90.0, worst=10.0) == pytest.approx(0.25)
    # worse than the (quantile) worst is clipped to 1; NaN incumbent is 1
    np.testing.assert_allclose(
        normalized_regret(np.array([1e10, np.nan, 1.0]), best=1.0, worst=11.0), [1.0, 1.0, 0.0]
    )
    with pytest.raises(ValueError):
        normalized_regret(1.0, best=1.0, worst=1.0)


def test_regret_at_fractions():
    traj = incumbent_trajectory(_run([9.0, 7.0, 5.0, 5.0, 3.0, 3.0, 3.0, 1.0]), "loss", True)
    r = regret_at_fractions(traj, budget=8, best=1.0, worst=9.0)
    # after 2 epochs inc 7 -> 6/8; after 4: 5 -> 4/8; after 8: 1 -> 0
    assert r == {0.25: pytest.approx(0.75), 0.5: pytest.approx(0.5), 1.0: pytest.approx(0.0)}
    # a run shorter than the budget keeps its last incumbent
    short = incumbent_trajectory(_run([9.0, 5.0]), "loss", True)
    assert regret_at_fractions(short, budget=8, best=1.0, worst=9.0)[1.0] == pytest.approx(0.5)


def test_average_ranks_with_ties():
    df = pd.DataFrame(
        {
            "method": ["A", "B", "C"] * 2,
            "task": ["t"] * 6,
            "seed": [0, 0, 0, 1, 1, 1],
            "budget_point": [1.0] * 6,
            "regret": [0.1, 0.2, 0.3, 0.5, 0.5, 0.0],
        }
    )
    ranks = average_ranks(df)
    # seed 0: A1 B2 C3; seed 1: C1, A and B tie at 2.5
    assert ranks["A"] == pytest.approx(1.75)
    assert ranks["B"] == pytest.approx(2.25)
    assert ranks["C"] == pytest.approx(2.0)
    assert list(ranks.index) == ["A", "C", "B"]


def test_speedup_vs_random():
    rs = incumbent_trajectory(_run([9.0, 8.0, 8.0, 6.0, 6.0, 6.0, 6.0, 6.0]), "loss", True)
    # random search reaches its final incumbent 6 after 4 epochs
    assert first_epoch_reaching(rs, 6.0, True) == 4.0
    fast = incumbent_trajectory(_run([7.0, 5.0, 4.0, 4.0]), "loss", True)
    assert speedup_vs_random(fast, rs, True) == pytest.approx(2.0)
    assert speedup_vs_random(rs, rs, True) == pytest.approx(1.0)
    # never reaches 6 -> 0 (pessimistic, documented); NaN values never count
    slow = incumbent_trajectory(_run([np.nan, 7.0, np.nan, 6.5]), "loss", True)
    assert speedup_vs_random(slow, rs, True) == 0.0
    # random search found nothing finite -> undefined
    rs_nan = incumbent_trajectory(_run([np.nan, np.inf]), "loss", True)
    assert np.isnan(speedup_vs_random(fast, rs_nan, True))
    # budget cut: RS cut to 2 epochs has target 8 reached at epoch 2; fast reaches 8 at 1
    assert speedup_vs_random(fast, rs, True, budget=2) == pytest.approx(2.0)
    # maximisation
    rs_max = incumbent_trajectory(_run([10.0, 20.0, 30.0]), "loss", False)
    m_max = incumbent_trajectory(_run([35.0]), "loss", False)
    assert speedup_vs_random(m_max, rs_max, False) == pytest.approx(3.0)


# --- fully-trained regret and budget use -----------------------------------------------------

MAX_T = 3


def _freeze_thaw_run():
    """
    (trial_id, epoch, loss) in simulated-time order, max_t = 3, budget 8 (row 9 overshoots).
    t0 is trained at row 5 (its value at max_t, 5.0, is worse than its epoch 2, 4.0), t1 at
    row 8; t2 has the best value (1.0) but is never trained; t2 and t3 never get past epoch 1
    within the budget (t2's epoch 2 is the overshoot row).
    """
    rows = [
        (0, 1, 8.0), (1, 1, 6.0), (0, 2, 4.0), (2, 1, 1.0), (0, 3, 5.0),
        (1, 2, 3.0), (3, 1, 9.0), (1, 3, 2.0), (2, 2, 0.5),
    ]
    df = pd.DataFrame(rows, columns=["trial_id", "epoch", "loss"])
    df["st_tuner_time"] = np.arange(1.0, len(df) + 1)
    # reported out of time order: the metrics must follow simulated time
    return df.iloc[[4, 0, 8, 2, 1, 7, 3, 6, 5]].reset_index(drop=True)


def _trajectory(df, do_minimize=True):
    return incumbent_trajectory(df, "loss", do_minimize, time_attr="epoch", max_t=MAX_T)


def test_fully_trained_regret_counts_value_at_max_t_only_once_reached():
    traj = _trajectory(_freeze_thaw_run())
    # best 0, worst 10: regret = loss / 10
    kw = dict(budget=8, best=0.0, worst=10.0, fractions=(0.25, 0.5, 0.625, 0.875, 1.0))
    anytime = regret_at_fractions(traj, **kw)
    trained = regret_at_fractions(traj, column="trained_incumbent", **kw)
    # anytime: 6 after 2 epochs, then t2's 1.0 from epoch 4 on
    assert anytime == pytest.approx({0.25: 0.6, 0.5: 0.1, 0.625: 0.1, 0.875: 0.1, 1.0: 0.1})
    # nothing trained after 2 and 4 epochs -> 1; after 5 (and 7) only t0, at its max_t value 5
    # (not its best epoch 4); t1 reaches max_t at epoch 8, so it counts only at 8
    assert trained == pytest.approx({0.25: 1.0, 0.5: 1.0, 0.625: 0.5, 0.875: 0.5, 1.0: 0.2})


def test_fully_trained_regret_none_reached_is_one():
    df = _freeze_thaw_run()
    df = df[df["epoch"] < MAX_T]
    traj = _trajectory(df)
    assert traj["trained_incumbent"].isna().all()
    r = regret_at_fractions(traj, 7, 0.0, 10.0, column="trained_incumbent")
    assert r == {0.25: 1.0, 0.5: 1.0, 1.0: 1.0}
    # the anytime regret of the same run is not 1 (t2's epoch 2, 0.5, is among the 7 rows)
    assert regret_at_fractions(traj, 7, 0.0, 10.0)[1.0] == pytest.approx(0.05)


def test_fully_trained_regret_maximise_ignores_diverged_and_clips():
    # accuracy, maximised; best 90, worst 10; t0 trained to 50, t1 diverged at max_t (NaN)
    df = pd.DataFrame(
        {
            "trial_id": [0, 1, 0, 1, 0, 1],
            "epoch": [1, 1, 2, 2, 3, 3],
            "loss": [20.0, 30.0, 40.0, 60.0, 50.0, np.nan],
            "st_tuner_time": np.arange(6.0),
        }
    )
    traj = _trajectory(df, do_minimize=False)
    # after 5 epochs only t0 is trained (50 -> (90 - 50) / 80 = 0.5); t1's NaN at max_t never wins
    assert regret_at_fractions(
        traj, 6, 90.0, 10.0, fractions=(5 / 6, 1.0), column="trained_incumbent"
    ) == pytest.approx({5 / 6: 0.5, 1.0: 0.5})
    # a lone diverged trained trial leaves the fully-trained regret at 1
    only_t1 = _trajectory(df[df["trial_id"] == 1], do_minimize=False)
    assert regret_at_fractions(only_t1, 3, 90.0, 10.0, column="trained_incumbent")[1.0] == 1.0
    # clipped to [0, 1] like the anytime regret: 95 beats the table's best 90
    df.loc[4, "loss"] = 95.0
    assert regret_at_fractions(
        _trajectory(df, do_minimize=False), 6, 90.0, 10.0, column="trained_incumbent"
    )[1.0] == 0.0


def test_budget_use_counts_and_shares():
    use = budget_use_at_fractions(_trajectory(_freeze_thaw_run()), budget=8, max_t=MAX_T)
    # after 2 epochs: t0, t1 started (both continue later: not stopped after 1)
    assert use[0.25] == pytest.approx(dict(
        epochs=2, trials_started=2, trials_trained=0, first_epoch_share=1.0,
        stopped_after_first_share=0.0, deepest_epoch=1,
    ))
    # after 4: t2 started; within the budget it never gets past epoch 1 (epoch 2 is row 9)
    assert use[0.5] == pytest.approx(dict(
        epochs=4, trials_started=3, trials_trained=0, first_epoch_share=0.75,
        stopped_after_first_share=0.25, deepest_epoch=2,
    ))
    # after 8: 4 started, t0 and t1 trained, t2 and t3 one epoch each
    assert use[1.0] == pytest.approx(dict(
        epochs=8, trials_started=4, trials_trained=2, first_epoch_share=0.5,
        stopped_after_first_share=0.25, deepest_epoch=3,
    ))
    # with a budget of 9, t2 got past epoch 1: only t3's epoch is "stopped after 1"
    use9 = budget_use_at_fractions(_trajectory(_freeze_thaw_run()), budget=9, max_t=MAX_T)
    assert use9[1.0]["stopped_after_first_share"] == pytest.approx(1 / 9)
    assert use9[1.0]["trials_trained"] == 2


def test_budget_use_short_and_empty_runs():
    traj = _trajectory(_freeze_thaw_run())
    # a run shorter than its budget (table exhausted) is taken as it ended: 9 epochs
    use = budget_use_at_fractions(traj, budget=20, max_t=MAX_T)
    assert use[1.0]["epochs"] == 9 and use[1.0]["trials_started"] == 4
    assert use[1.0]["first_epoch_share"] == pytest.approx(4 / 9)
    assert use[0.25]["epochs"] == 5 and use[0.25]["trials_trained"] == 1
    empty = budget_use_at_fractions(traj.iloc[:0], budget=8, max_t=MAX_T)
    assert empty[1.0]["trials_started"] == 0 and np.isnan(empty[1.0]["first_epoch_share"])
    assert np.isnan(empty[1.0]["deepest_epoch"])
