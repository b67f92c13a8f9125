"""Exports: NWB round trip (validator, identical spike times, trials) and Neo, with
Elephant as the oracle of snrl's own statistics on the exported trains."""

from __future__ import annotations

import numpy as np
import pytest

from snrl.analysis import SpikeStats
from snrl.networks import Activity, LayerActivity

pytest.importorskip("pynwb")
pytest.importorskip("neo")


class _Episode:
    def __init__(self, rng, t=400, n=6, trials=None):
        p = np.linspace(0.02, 0.2, n)
        self.spikes = (rng.random((t, n)) < p).astype(np.float32)
        v = rng.normal(size=(t, n)).astype(np.float32)
        sign = [1] * (n - 2) + [-1, -1]
        self.activity = Activity(
            [LayerActivity("lif0", "spiking", n, spikes=self.spikes, v=v, sign=sign)]
        )
        self.layers = self.activity.info()
        self.observations = rng.normal(size=(t, 3))
        self.actions = rng.integers(0, 2, t)
        self.rewards = np.ones(t)
        self.substeps = 1
        self.trials = trials

    def __len__(self):
        return len(self.observations)


def _export(n_eps=3, trials=None):
    from snrl.analysis.export import SpikeExport

    rng = np.random.default_rng(0)
    eps = [_Episode(rng, trials=trials) for _ in range(n_eps)]
    ex = SpikeExport(eps[0].layers, dt=1e-3)
    for e in eps:
        ex.add(e)
    return ex, eps


def test_nwb_validates_and_reads_back_identical_spike_times(tmp_path):
    import pynwb

    from snrl.analysis.export import read_nwb_spike_times

    trials = [
        {
            "start_step": 10,
            "end_step": 99,
            "gt": 1,
            "choice": 1,
            "correct": True,
            "conditions": {"coh": 25.6},
        },
        {
            "start_step": 100,
            "end_step": 199,
            "gt": 0,
            "choice": 1,
            "correct": False,
            "conditions": {"coh": 6.4},
        },
    ]
    ex, eps = _export(trials=trials)
    path = ex.write_nwb(tmp_path / "spikes.nwb")
    assert pynwb.validate(path=str(path)) == []
    units = read_nwb_spike_times(path)
    assert len(units) == 6
    for u in units:
        j = u["neuron_index"]
        want = np.concatenate(
            [(k * 400 + np.flatnonzero(e.spikes[:, j])) * 1e-3 for k, e in enumerate(eps)]
        )
        np.testing.assert_array_equal(u["spike_times"], want)
        assert u["population"] == ("E" if j < 4 else "I") and u["layer"] == "lif0"
    with pynwb.NWBHDF5IO(str(path), "r") as io:
        nwb = io.read()
        df = nwb.trials.to_dataframe()
        assert len(df) == 6 and list(df["condition_coh"][:2]) == [25.6, 6.4]
        assert df["start_time"].iloc[3] == pytest.approx(0.4 + 0.1)
        assert nwb.acquisition["membrane_lif0"].data.shape == (1200, 6)
        assert nwb.processing["behavior"]["rewards"].data.shape == (1200,)
        assert len(nwb.epochs) == 3


def test_neo_block_and_elephant_agree_with_snrl(tmp_path):
    import quantities as pq
    from elephant.statistics import cv, fanofactor, isi, mean_firing_rate

    ex, eps = _export()
    block = ex.to_neo()
    assert len(block.segments) == 3
    st = block.segments[1].spiketrains[2]
    ann = {k: st.annotations[k] for k in ("layer", "population", "index")}
    assert ann == {"layer": "lif0", "population": "E", "index": 2}
    assert st.t_start == 0.4 * pq.s and st.t_stop == 0.8 * pq.s
    assert float(st.sampling_period.rescale("s")) == pytest.approx(1e-3)

    acc = SpikeStats(6, dt=1e-3, fano_window=400)  # one window per episode
    for e in eps:
        acc.add(e.spikes)
    per = acc.neuron_stats()
    for j in range(6):
        trains = [seg.spiketrains[j] for seg in block.segments]
        rate = np.mean([float(mean_firing_rate(t).rescale("Hz")) for t in trains])
        assert per["rate"][j] == pytest.approx(rate)  # equal-length episodes
        isis = np.concatenate([isi(t).rescale("s").magnitude for t in trains])
        assert per["cv_isi"][j] == pytest.approx(cv(isis))
        assert per["fano"][j] == pytest.approx(fanofactor(trains))

    path = ex.write_neo(tmp_path / "spikes_neo.mat")
    from neo.io import NeoMatlabIO

    back = NeoMatlabIO(filename=str(path)).read_block()
    np.testing.assert_allclose(
        back.segments[1].spiketrains[2].rescale("s").magnitude, st.rescale("s").magnitude
    )


def test_a_missing_extra_names_the_install_line(tmp_path, monkeypatch, capsys):
    import sys

    from snrl.analysis.export import require_extra
    from snrl.cli import main
    from snrl.errors import UserError

    monkeypatch.setitem(sys.modules, "pynwb", None)  # import pynwb now raises ImportError
    with pytest.raises(UserError, match=r"pip install 'snrl\[export\]'"):
        require_extra("pynwb")
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "best.pt").write_bytes(b"")
    rc = main(["analyze", str(run), "--export", "nwb"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("error: ")
    assert "pip install 'snrl[export]'" in err
    assert not (run / "analysis").exists()
