"""benchmarks/normalisation_replay.py: where "trials_if_alike" would act on a recorded run."""

import json

import numpy as np
import pandas as pd

from benchmarks.normalisation_replay import main, replay_run
from benchmarks.runner import RESULTS_FILE, RUN_FILE


def _record(run_dir, trial_ids, losses):
    run_dir.mkdir(parents=True)
    definition = {"metric": "loss", "do_minimize": True, "time_attr": "epoch", "max_t": 20}
    (run_dir / RUN_FILE).write_text(json.dumps({"definition": definition}))
    epochs = pd.Series(trial_ids).groupby(trial_ids).cumcount() + 1  # each trial's results in order
    pd.DataFrame({"trial_id": trial_ids, "epoch": epochs, "loss": losses}).to_csv(run_dir / RESULTS_FILE, index=False)


def test_replay_finds_where_resumed_alike_scores_collapse_the_normalisation(tmp_path, capsys):
    # trial 0 starts at chance and is resumed 11 times; trials 1 and 2 start worse, once each
    chance = [np.log(2) + 1e-6 * k for k in range(12)]
    stuck = tmp_path / "bench" / "task" / "M" / "seed0"
    _record(stuck, [1, 2] + [0] * 12, [0.9, 1.4] + chance)
    replay = replay_run(stuck)
    # from the 9th score on, 7 of them at chance: every spread is below the resolution bound,
    # and the trials' best scores (3 values) differ from every score
    assert replay.degenerate == replay.differing == tuple(range(9, 15))
    # two trials' first epochs that happen to be equal: degenerate, but both fits see the same
    alike_starts = tmp_path / "bench" / "task" / "M" / "seed1"
    _record(alike_starts, [0, 1, 0, 1, 2], [0.5, 0.5, 0.4, 0.3, 0.45])
    replay = replay_run(alike_starts)
    assert replay.degenerate == (2,) and replay.differing == ()
    main([str(tmp_path), "--methods", "M", "--benchmarks", "bench"])
    out = capsys.readouterr().out
    assert "bench M: 2 runs, 2 with a degenerate prefix, 1 where each trial's best differs there" in out
    assert f"{stuck}: from 9 scores on (6 prefixes)" in out
