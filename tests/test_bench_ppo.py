"""benchmarks/bench_ppo.py: --against (learning, two snrl checkouts) and a rerun of --speed."""

from __future__ import annotations

import argparse
import math

import pytest

from tests.bench_scripts import ROOT, load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_ppo")


def test_compare_reach_counts_ties_half_and_never_as_latest(bench):
    # this: 10, 20, never; baseline: 10, 30, 40. Pairs where this is later: (10, 10) half,
    # (20, 10) one, (never, *) three: 4.5 of 9.
    c = bench.compare_reach([10, 20, None], [10, 30, 40])
    assert c["later"] == pytest.approx(0.5)
    assert c["median"] == 20 and c["median_base"] == 30
    c = bench.compare_reach([None, None], [5, 6])
    assert c["later"] == 1.0 and math.isinf(c["median"])


def test_compare_reach_p_value_of_two_separated_arms(bench):
    # 8 runs each, every run of this tree sooner: exact two-sided p = 2 / C(16, 8)
    c = bench.compare_reach(list(range(1, 9)), list(range(11, 19)))
    assert c["later"] == 0.0
    assert c["p_value"] == pytest.approx(2 / math.comb(16, 8), rel=1e-6)


def _args(tmp_path, against):
    return argparse.Namespace(
        steps=None,
        quick=True,
        seeds=2,
        seed_start=7,
        variants=["lif", "sb3"],
        config=None,
        set=["n_envs=8"],
        out=str(tmp_path),
        against=against,
    )


def test_against_runs_each_snrl_run_from_both_checkouts(bench, tmp_path):
    other = tmp_path / "old"
    jobs = bench._jobs(_args(tmp_path, other), "cartpole")
    assert [(j["variant"], j["seed"]) for j in jobs] == [
        ("lif", 7),
        ("lif@baseline", 7),
        ("sb3", 7),
        ("lif", 8),
        ("lif@baseline", 8),
        ("sb3", 8),
    ]
    by = {(j["variant"], j["seed"]): j for j in jobs}
    assert by[("lif", 7)]["tree"] == str(bench.ROOT)
    assert by[("lif@baseline", 7)]["tree"] == str(other)
    assert "tree" not in by[("sb3", 7)]
    assert by[("lif@baseline", 8)]["sets"] == ["n_envs=8"]  # the same recipe on both
    assert by[("lif@baseline", 8)]["run_dir"] == str(
        tmp_path / "cartpole" / "lif@baseline" / "seed8"
    )
    assert all("tree" not in j for j in bench._jobs(_args(tmp_path, None), "cartpole"))


def test_against_a_directory_without_snrl_is_refused(bench, tmp_path, capsys):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        bench.main(["--against", str(tmp_path), "--quick", "--out", str(out)])
    assert e.value.code == 2
    assert "not an snrl checkout" in capsys.readouterr().err
    assert not out.exists()


def test_against_lines_compare_the_two_arms(bench):
    def run(variant, seed, reach, best, last):
        return {
            "variant": variant,
            "seed": seed,
            "steps_to_threshold": reach,
            "best_return": best,
            "last_return": last,
            "tree": "/x/old",
        }

    by = {
        "lif": [run("lif", 0, 100, 500, 500), run("lif", 1, None, 400, 300)],
        "lif@baseline": [
            run("lif@baseline", 0, 200, 500, 480),
            run("lif@baseline", 1, 300, 500, 500),
        ],
    }
    (line,) = bench._against_lines(by, 475.0)
    assert "lif@baseline (/x/old)" in line
    assert "median inf vs 250" in line
    assert "later) = 0.50" in line  # (100 vs 200, 300): 0; (never vs both): 2 -> 2 of 4
    assert "best >= 475 on 1/2 vs 2/2" in line
    assert "last >= 475 on 1/2 vs 2/2" in line


def test_partial_does_not_evaluate_the_other_checkouts_runs(bench, tmp_path):
    (spec,) = [
        j
        for j in bench._jobs(_args(tmp_path, tmp_path / "old"), "cartpole")
        if j["variant"] == "lif@baseline" and j["seed"] == 7
    ]
    ckpt = bench._snrl_run_dir(spec) / "checkpoints"
    ckpt.mkdir(parents=True)
    (ckpt / "best.pt").write_bytes(b"not read")  # this tree's code would load and evaluate it
    assert bench.partial_result(spec) is None


def test_speed_runs_again_into_the_same_out(tmp_path):
    """The documented --speed command, run twice: the second times again (it replaced its own
    earlier timing run, not refused it), and a file it did not write stays."""
    import subprocess
    import sys

    out = tmp_path / "bench"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_ppo.py"), "--speed", "--repeats", "1",
           "--variants", "lif", "--steps", "256", "--out", str(out)]
    tables = []
    for i in range(2):
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "FAILED" not in res.stdout, res.stdout
        if i == 0:
            (out / "speed" / "round0" / "lif" / "run" / "notes.txt").write_text("mine")
        tables.append((out / "speed" / "table.md").read_text())
    for table in tables:
        row = next(line for line in table.splitlines() if line.startswith("| lif wall, s"))
        assert math.isfinite(float(row.split("|")[2]))  # a time, not nan
    assert (out / "speed" / "round0" / "lif" / "run" / "notes.txt").read_text() == "mine"
