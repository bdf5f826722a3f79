"""benchmarks/demo.py's table: one row per method, the regrets a person compares at a glance."""

import pandas as pd

from benchmarks import demo


def test_demo_table_averages_each_method_over_its_runs():
    rows = []
    for method, regret, trained in (("BOHB", 0.2, 3), ("DyHPO", 0.1, 5), ("Extra", 0.5, 1)):
        for seed in (0, 1):
            for f in (0.25, 0.5, 1.0):
                rows.append(dict(method=method, seed=seed, budget_point=f, regret=regret * (2 - f) + 0.01 * seed,
                                 trained_regret=0.9 if f < 1 else regret + 0.1, trials_trained=trained + seed))
    table = demo.demo_table(pd.DataFrame(rows))
    assert list(table["method"]) == ["DyHPO", "BOHB", "Extra"]  # demo.METHODS order, then others
    dy = table.iloc[0]
    assert dy["runs"] == 2 and round(dy["regret 25 %"], 4) == round(0.1 * 1.75 + 0.005, 4)
    assert round(dy["regret 100 %"], 4) == 0.105 and round(dy["fully trained 100 %"], 4) == 0.2
    assert dy["trials trained"] == 5.5
    text = demo.format_table(table).splitlines()
    assert text[0].split() == ["method", "runs", "regret", "25", "%", "regret", "50", "%", "regret", "100", "%",
                               "fully", "trained", "100", "%", "trials", "trained"]
    assert text[1].split() == ["DyHPO", "2", "0.180", "0.155", "0.105", "0.200", "5.5"]
