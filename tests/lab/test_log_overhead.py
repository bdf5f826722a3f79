"""benchmarks/latency.py --log-overhead: the decision log's share of a decision, and a run
without the log beside it (the figures are measured, not asserted: only what the line says)."""

import re

from benchmarks import latency


def test_log_overhead_line_names_both_runs(capsys):
    assert latency.main(["--methods", "DyHPO", "BOHB", "--max-obs", "12", "--max-t", "3", "--log-overhead"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("DyHPO: decision log ")  # BOHB has no log
    m = re.search(r"([\d.]+) ms of ([\d.]+) ms CPU per decision \(([\d.]+) %\), 12 observations; "
                  r"without the log ([\d.]+) ms \(with / without: ([\d.]+)\)", lines[0])
    assert m, lines[0]
    log_ms, decision_ms, share = float(m.group(1)), float(m.group(2)), float(m.group(3))
    assert 0 < log_ms < decision_ms and abs(share - 100 * log_ms / decision_ms) < 0.01 + 0.01 * share
