"""benchmarks/provenance.py: what made a run (package versions, the repository's commit), as
recorded in each run.json and named by the tables."""

import subprocess

import numpy as np
import pytest

from benchmarks import provenance


def test_versions_are_the_installed_ones():
    versions = provenance.package_versions(["numpy", "no-such-distribution-here"])
    assert versions["numpy"] == np.__version__ and versions["no-such-distribution-here"] is None
    assert versions["python"].count(".") == 2


def test_the_commit_says_when_tracked_files_changed(tmp_path):
    assert provenance.git_commit(tmp_path) is None  # not a git checkout
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "a.py").write_text("x = 1\n")
    subprocess.run(git + ["add", "a.py"], cwd=tmp_path, check=True)
    subprocess.run(git + ["commit", "-qm", "a"], cwd=tmp_path, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert provenance.git_commit(tmp_path) == head
    (tmp_path / "untracked.txt").write_text("results\n")  # untracked files are not the code
    assert provenance.git_commit(tmp_path) == head
    (tmp_path / "a.py").write_text("x = 2\n")
    assert provenance.git_commit(tmp_path) == head + "+changes"


def test_the_versions_of_a_set_of_runs_name_each_set_with_its_runs():
    old = {"versions": {"python": "3.11.7", "gpytorch": "1.11", "pandas": None}}
    new = {"versions": {"python": "3.11.7", "gpytorch": "1.15.2"}}
    assert provenance.versions_key(old) == "python 3.11.7, gpytorch 1.11"
    assert provenance.versions_key({}) == "not recorded"
    keys = [provenance.versions_key(s) for s in (new, old, new)]
    assert provenance.versions_text(keys[:1]) == "python 3.11.7, gpytorch 1.15.2"
    assert provenance.versions_text(keys) == (
        "python 3.11.7, gpytorch 1.15.2 (2 runs); python 3.11.7, gpytorch 1.11 (1 runs)"
    )
    assert provenance.versions_text([]) == "no runs"
    on = {**new, "processor": {"cpu": "AMD EPYC", "torch_cpu_capability": "AVX512"}}
    assert provenance.versions_key(on) == "python 3.11.7, gpytorch 1.15.2; processor AMD EPYC AVX512"
    other = {**new, "processor": {"cpu": "AMD EPYC", "torch_cpu_capability": "AVX2"}}
    assert provenance.versions_key(other) != provenance.versions_key(on)


def test_the_processor_is_what_torch_uses():
    torch = pytest.importorskip("torch", reason="torch is a core dependency; this environment lacks it")
    cpu = provenance.processor()
    assert cpu["torch_cpu_capability"] == str(torch.backends.cpu.get_cpu_capability())
    assert cpu["cpu"]


@pytest.mark.parametrize("missing", [True, False])
def test_results_md_names_the_versions(missing):
    import pandas as pd

    from benchmarks.results import _versions_line

    long = pd.DataFrame(dict(benchmark="LCBench", n_workers=1, method="ASHA", task=["car", "car", "adult"],
                             seed=0, budget_point=[0.5, 1.0, 1.0], versions=["numpy 2.0", "numpy 2.0", "numpy 1.26"]))
    if missing:
        expected = "- **Versions:** not recorded (runs written before `run.json` recorded them)."
        assert _versions_line(long.drop(columns="versions")) == expected
        assert _versions_line(long.assign(versions="not recorded")) == expected
    else:
        assert _versions_line(long).startswith("- **Versions:** numpy 2.0 (1 runs); numpy 1.26 (1 runs) (the figures")
