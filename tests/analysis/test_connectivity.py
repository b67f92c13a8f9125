"""Oracles for the connectivity analyses: a hand-built Dale matrix, a known spectrum."""

import numpy as np
import pytest

from snrl.analysis.connectivity import (
    block_stats,
    ei_blocks,
    eigenspectrum,
    selectivity_connectivity,
    spectral_radius,
)
from snrl.errors import UserError


def _dale():
    # neurons 0, 1, 3 excitatory; 2 inhibitory. Row = presynaptic.
    sign = np.array([1, 1, -1, 1])
    w = np.array(
        [
            [0.0, 0.5, 0.2, 0.0],
            [0.1, 0.0, 0.4, 0.3],
            [-1.0, -2.0, 0.0, -0.5],
            [0.0, 0.6, 0.0, 0.0],
        ]
    )
    return w, sign


def test_blocks_of_a_hand_built_dale_matrix():
    w, sign = _dale()
    b = ei_blocks(w, sign)
    np.testing.assert_array_equal(b["E->E"]["weights"], [[0, 0.5, 0], [0.1, 0, 0.3], [0, 0.6, 0]])
    np.testing.assert_array_equal(b["E->I"]["weights"], [[0.2], [0.4], [0.0]])
    np.testing.assert_array_equal(b["I->E"]["weights"], [[-1.0, -2.0, -0.5]])
    np.testing.assert_array_equal(b["I->I"]["weights"], np.zeros((1, 1)))
    st = block_stats(w, sign)
    ee = st["E->E"]  # six off-diagonal synapses: 0.5, 0, 0.1, 0.3, 0, 0.6
    assert ee["mean"] == pytest.approx(1.5 / 6)
    assert ee["fraction_nonzero"] == pytest.approx(4 / 6)
    assert ee["in_degree"] == pytest.approx(4 / 3)  # onto 0: 1, onto 1: 2, onto 3: 1
    assert ee["in_strength"] == pytest.approx(1.5 / 3)
    assert ee["n_pre"] == 3 and ee["n_post"] == 3
    ie = st["I->E"]
    assert ie["mean"] == pytest.approx(-3.5 / 3) and ie["out_degree"] == 3.0
    assert ie["in_degree"] == 1.0
    assert st["E->I"]["fraction_nonzero"] == pytest.approx(2 / 3)
    assert np.isnan(st["I->I"]["mean"])  # only the autapse, which is left out
    # the E->E block's spectrum by hand: eigenvalues of [[0,.5,0],[.1,0,.3],[0,.6,0]]
    assert ee["spectral_radius"] == pytest.approx(np.sqrt(0.05 + 0.18))
    with pytest.raises(UserError, match="N signs"):
        block_stats(w, sign[:3])


def test_spectrum_of_known_matrices():
    rot = np.array([[0.0, -2.0], [2.0, 0.0]])  # eigenvalues +-2i
    ev = eigenspectrum(rot)
    np.testing.assert_allclose(sorted(ev.imag), [-2, 2], atol=1e-12)
    assert spectral_radius(rot) == pytest.approx(2.0)
    tri = np.array([[0.5, 7.0, 1.0], [0, -3.0, 2.0], [0, 0, 1.0]])
    assert spectral_radius(tri) == pytest.approx(3.0)
    np.testing.assert_allclose(np.abs(eigenspectrum(tri)), [3.0, 1.0, 0.5])


def test_same_preference_cells_connect_more_when_planted():
    rng = np.random.default_rng(0)
    n = 40
    sign = np.where(np.arange(n) < 32, 1, -1)
    pref = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    pref[5] = 0.0  # no preference: left out
    w = np.abs(rng.normal(0.1, 0.02, (n, n)))
    same = pref[:, None] == pref[None, :]
    w = np.where(same, w + 0.05, w) * sign[:, None]
    np.fill_diagonal(w, 0)
    res = selectivity_connectivity(w, sign, pref, n_shuffles=200, seed=0)
    assert res["n_neurons"] == 31
    assert res["difference"] == pytest.approx(res["same"] - res["opposite"])
    assert res["difference"] == pytest.approx(0.05, abs=0.01)
    assert res["p_value"] == pytest.approx(1 / 201)
    assert res["n_same_pairs"] + res["n_opposite_pairs"] == 31 * 30
    # no planted structure: no significant difference
    w0 = np.abs(rng.normal(0.1, 0.02, (n, n))) * sign[:, None]
    assert selectivity_connectivity(w0, sign, pref, n_shuffles=200)["p_value"] > 0.01
    # one preference only: nothing to compare
    assert selectivity_connectivity(w, sign, np.ones(n))["difference"] is None
