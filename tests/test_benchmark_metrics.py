import numpy as np
import pandas as pd
import pytest

from benchmarks.metrics import (
    average_ranks,
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
