"""Every notebook runs top to bottom against the test session (as CI would on Databricks)."""

import runpy
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.py"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(spark, path, capsys):
    runpy.run_path(str(path), init_globals={"spark": spark}, run_name="__main__")
    assert capsys.readouterr().out  # it showed something


def test_there_are_notebooks():
    assert NOTEBOOKS
