"""The wheel is the product: installed alone (no checkout), it runs `python -m neardup_spark`,
`neardup demo` and gives the spark-submit entry file; presets ship inside it."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.process  # every test here starts Spark in processes of its own

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv holding only the built wheel; its dependencies come from this
    interpreter's site-packages through a .pth line (no download, no checkout on the path)."""
    work = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist"),
                            str(ROOT)], capture_output=True, text=True, timeout=600)
    if built.returncode != 0:
        pytest.skip(f"cannot build the wheel here: {built.stderr[-500:]}")
    wheel = next((work / "dist").glob("neardup_spark-*.whl"))
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
                   check=True, capture_output=True, timeout=600)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "deps-from-test-env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv, work


def _run(venv: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYSPARK_PYTHON": str(venv / "bin" / "python"), "NEARDUP_LOG_DIR": str(cwd / "logs")}
    env.pop("PYTHONPATH", None)
    return subprocess.run([*argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_python_m_and_the_job_file_come_from_the_wheel(installed):
    venv, work = installed
    python = str(venv / "bin" / "python")
    where = _run(venv, work, python, "-c", "import neardup_spark; print(neardup_spark.__file__)")
    assert str(venv) in where.stdout, where.stdout + where.stderr  # the wheel's copy, not the checkout
    helped = _run(venv, work, python, "-m", "neardup_spark", "--help")
    assert helped.returncode == 0 and "demo" in helped.stdout
    job = _run(venv, work, str(venv / "bin" / "neardup"), "job-file")
    assert job.returncode == 0 and Path(job.stdout.strip()).is_file() and str(venv) in job.stdout


def test_demo_and_presets_run_from_any_directory(installed):
    venv, work = installed
    out = work / "demo"
    ran = _run(venv, work, str(venv / "bin" / "neardup"), "demo", "--output", str(out))
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "neardup: 1,000 documents -> " in ran.stdout and (out / "report.json").is_file()
    params = _run(venv, work, str(venv / "bin" / "neardup"), "params", "--preset", "cluster")
    assert params.returncode == 0, params.stderr[-2000:]


def test_the_databricks_job_names_an_entry_point_of_the_wheel_and_valid_parameters(installed):
    """jobs/databricks_job.json: each wheel task's package and entry point exist in the installed
    wheel's metadata, its parameters parse and validate, and a failing command fails the task."""
    import json

    venv, work = installed
    spec = json.loads((ROOT / "jobs" / "databricks_job.json").read_text())
    tasks = [t for t in spec["tasks"] if "python_wheel_task" in t]
    assert tasks
    for task in tasks:
        wheel_task = task["python_wheel_task"]
        probe = (
            "import importlib.metadata as md, json, sys\n"
            f"eps = md.distribution({wheel_task['package_name']!r}).entry_points\n"
            f"ep = [e for e in eps if e.name == {wheel_task['entry_point']!r}][0]\n"
            "from neardup_spark import cli\n"
            f"params = {wheel_task['parameters']!r}\n"
            "cli.config_from_args(cli._parser().parse_args(params))\n"
            "print(ep.value)\n"
        )
        got = _run(venv, work, str(venv / "bin" / "python"), "-c", probe)
        assert got.returncode == 0, got.stderr[-2000:]
        assert got.stdout.strip() == "neardup_spark.cli:job"
        assert any(lib.get("whl", "").endswith("-py3-none-any.whl") for lib in task["libraries"])
    # The task's entry point exits non-zero when its command fails (a wheel task fails on that).
    failed = _run(venv, work, str(venv / "bin" / "neardup-job"), "run", "--input", str(work / "missing.parquet"),
                  "--output", str(work / "o"))
    assert failed.returncode == 2 and "neardup: error:" in failed.stderr
