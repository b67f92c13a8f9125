"""Spike-train statistics: pure numpy functions and one streaming accumulator.

Every number snrl reports about a network's spikes is defined once, in :data:`METRICS`
(name -> definition and unit); ``docs/analysis.md`` is generated from it. Time is counted in
neuron steps; with the neuron step ``dt`` (seconds) known, rates are in Hz, else in spikes per
step. Spikes are 0/1 arrays shaped ``(T, N)``: T neuron steps, N neurons, time first.

The accumulator (:class:`SpikeStats`) is fed one episode at a time and keeps only running
sums (per neuron, per pair of neurons, per window), so 1,000 episodes of 256 neurons never
need the whole ``(episodes, T, N)`` tensor in memory. The pure functions below compute the
same numbers for one array, and the tests check that the two agree.

Why by hand: the definitions are a few lines of numpy each, and no library streams them
(Elephant computes them from whole ``neo.SpikeTrain`` objects; the tests use it as the
oracle for the exported trains).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from snrl.errors import UserError

__all__ = [
    "METRICS",
    "Metric",
    "NEURON_METRICS",
    "SpikeStats",
    "fano_factor",
    "firing_rate",
    "isi_cv",
    "metrics_table",
    "population_sparseness",
    "spike_count_correlation",
    "window_counts",
]


@dataclasses.dataclass(frozen=True)
class Metric:
    """A reported number: its definition and unit (``unit_no_dt`` when ``dt`` is unknown)."""

    definition: str
    unit: str
    unit_no_dt: str | None = None

    def unit_for(self, dt: float | None) -> str:
        """The unit of the number given the neuron step (None: unknown)."""
        return self.unit if dt is not None or self.unit_no_dt is None else self.unit_no_dt


#: Every summary number, by name. Per neuron ("neuron_*") or per population (E, I, all).
METRICS: dict[str, Metric] = {
    "n_neurons": Metric("number of neurons in the population", "neurons"),
    "rate_mean": Metric(
        "firing rate (spike count / (steps x dt)) averaged over the population's neurons",
        "Hz",
        "spikes/step",
    ),
    "rate_median": Metric("median over neurons of the firing rate", "Hz", "spikes/step"),
    "cv_isi_mean": Metric(
        "coefficient of variation of the inter-spike intervals, std/mean (ddof 0) of the "
        "ISIs within episodes, pooled: the intervals of all episodes together, one CV per "
        "neuron; averaged over neurons with >= 3 spikes",
        "1",
    ),
    "cv_isi_episodes_mean": Metric(
        "ISI CV per episode (as elephant.statistics.cv of each episode's train), averaged "
        "over the episodes where the neuron has >= 2 ISIs, then over neurons; lower than the "
        "pooled cv_isi_mean when rates differ between episodes",
        "1",
    ),
    "fano_mean": Metric(
        "Fano factor var/mean (ddof 0) of the spike counts in non-overlapping windows of "
        "`fano_window` steps within episodes, averaged over neurons that spiked",
        "1",
    ),
    "corr_mean": Metric(
        "Pearson correlation of the spike counts of two neurons in bins of `corr_bin` steps, "
        "averaged over distinct pairs of the population (silent neurons excluded)",
        "1",
    ),
    "corr_std": Metric("standard deviation over pairs of the spike-count correlation", "1"),
    "corr_q05": Metric("5th percentile over pairs of the spike-count correlation", "1"),
    "corr_q95": Metric("95th percentile over pairs of the spike-count correlation", "1"),
    "sparseness_population": Metric(
        "Treves-Rolls population sparseness, 1 - a with a = (mean_i c_i)^2 / mean_i c_i^2 "
        "over the neurons' counts c_i in one `corr_bin` bin, normalized by 1 - 1/N, "
        "averaged over bins with a spike (0: all fire equally, 1: one neuron fires)",
        "1",
    ),
    "sparseness_lifetime": Metric(
        "Treves-Rolls lifetime sparseness of a neuron over the `corr_bin` bins (same formula "
        "over time), averaged over neurons that spiked",
        "1",
    ),
    "fraction_silent": Metric("fraction of neurons with no spike at all", "1"),
    "fraction_saturated": Metric(
        "fraction of neurons that spike on at least `saturation` (0.9) of the steps", "1"
    ),
    "current_exc_mean": Metric(
        "excitatory synaptic current into a neuron, sum of presynaptic spikes times the "
        "positive effective weights (recurrent from step t-1 plus feed-forward), mean over "
        "steps and neurons",
        "membrane units/step",
    ),
    "current_inh_mean": Metric(
        "inhibitory synaptic current, as current_exc_mean with the negative weights (<= 0)",
        "membrane units/step",
    ),
    "current_ext_mean": Metric(
        "external current x_t W_in + b of the first layer (observations are not neurons; "
        "deeper layers: the bias b), mean over steps and neurons",
        "membrane units/step",
    ),
    "ei_ratio": Metric(
        "E/I balance ratio -mean(inhibitory)/mean(excitatory current), per neuron, averaged "
        "over neurons with excitatory input (1: balanced on average)",
        "1",
    ),
    "ei_correlation": Metric(
        "Pearson correlation over steps of a neuron's excitatory current and its negated "
        "inhibitory current (tracking of E by I), averaged over neurons where both vary",
        "1",
    ),
}


#: The per-neuron arrays of ``summary.json`` (``layers.<name>.neurons.<key>``), by name.
NEURON_METRICS: dict[str, Metric] = {
    "rate": Metric("the neuron's firing rate, spike count / (steps x dt)", "Hz", "spikes/step"),
    "cv_isi": Metric(
        "std/mean (ddof 0) of the neuron's ISIs within episodes, pooled over episodes; null "
        "with < 2 ISIs",
        "1",
    ),
    "cv_isi_episodes": Metric(
        "mean over episodes of the neuron's per-episode ISI CV (episodes with >= 2 ISIs); "
        "null when no episode has 2",
        "1",
    ),
    "fano": Metric(
        "var/mean (ddof 0) of the neuron's spike counts in `fano_window` windows; null when "
        "it never spiked",
        "1",
    ),
    "ei_ratio": Metric(
        "-mean(inhibitory)/mean(excitatory input current) of the neuron; null without "
        "excitatory input",
        "1",
    ),
    "ei_correlation": Metric(
        "Pearson correlation over steps of the neuron's excitatory and negated inhibitory "
        "current; null when either is constant",
        "1",
    ),
}


def metrics_table(which: str = "population") -> str:
    """The markdown table of :data:`METRICS` (``which="population"``) or of
    :data:`NEURON_METRICS` (``"neuron"``); docs/analysis.md is generated from them."""
    table = {"population": METRICS, "neuron": NEURON_METRICS}[which]
    rows = ["| name | definition | unit |", "|---|---|---|"]
    for name, m in table.items():
        unit = m.unit if m.unit_no_dt is None else f"{m.unit} ({m.unit_no_dt} without dt)"
        rows.append(f"| `{name}` | {m.definition} | {unit} |")
    return "\n".join(rows) + "\n"


# ---------------------------------------------------------------------- pure functions
def _spikes(spikes: Any, name: str = "spikes") -> np.ndarray:
    s = np.asarray(spikes)
    if s.ndim != 2:
        raise UserError(f"{name} has shape {s.shape} (give a (T, N) array: steps x neurons)")
    return s


def firing_rate(spikes: Any, dt: float | None = None) -> np.ndarray:
    """Per-neuron firing rate: spike count / (T x dt).

    Args:
        spikes: (T, N) 0/1 spikes.
        dt: neuron step in seconds, or None.

    Returns:
        (N,) rates in Hz (spikes per step when ``dt`` is None).
    """
    s = _spikes(spikes)
    rate = s.sum(axis=0, dtype=np.float64) / max(s.shape[0], 1)
    return rate / dt if dt is not None else rate


def _isis(spikes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(neuron index, interval in steps) of every inter-spike interval in ``spikes``."""
    neuron, t = np.nonzero(spikes.T)  # sorted by neuron, then time
    same = neuron[1:] == neuron[:-1]
    return neuron[1:][same], np.diff(t)[same].astype(np.float64)


def isi_cv(spikes: Any) -> np.ndarray:
    """Per-neuron coefficient of variation of the inter-spike intervals: std / mean (ddof 0,
    as ``elephant.statistics.cv``). NaN for a neuron with fewer than 2 intervals.

    Returns:
        (N,) dimensionless (a regular train: 0; a Poisson train: about 1).
    """
    s = _spikes(spikes)
    n = s.shape[1]
    neuron, isi = _isis(s)
    cnt = np.bincount(neuron, minlength=n).astype(np.float64)
    s1 = np.bincount(neuron, isi, minlength=n)
    s2 = np.bincount(neuron, isi * isi, minlength=n)
    return _cv(cnt, s1, s2)


def _cv(cnt: np.ndarray, s1: np.ndarray, s2: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s1 / cnt
        var = np.maximum(s2 / cnt - mean * mean, 0.0)
        cv = np.sqrt(var) / mean
    return np.where(cnt >= 2, cv, np.nan)


def window_counts(spikes: Any, window: int) -> np.ndarray:
    """Spike counts in consecutive non-overlapping windows of ``window`` steps.

    Returns:
        (T // window, N) counts; the last ``T % window`` steps are dropped.
    """
    s = _spikes(spikes)
    w = int(window)
    if w < 1:
        raise UserError(f"window={window} (give a window of at least 1 step)")
    k = s.shape[0] // w
    return s[: k * w].reshape(k, w, s.shape[1]).sum(axis=1, dtype=np.float64)


def fano_factor(counts: Any) -> np.ndarray:
    """Fano factor of spike counts: var / mean over windows (ddof 0, as
    ``elephant.statistics.fanofactor``). NaN where the mean count is 0.

    Args:
        counts: (W, N) counts of N neurons in W windows of equal length.

    Returns:
        (N,) dimensionless (Poisson: 1; a fixed count: 0).
    """
    c = np.asarray(counts, dtype=np.float64)
    return _fano(np.full(c.shape[1], c.shape[0], np.float64), c.sum(0), (c * c).sum(0))


def _fano(n: np.ndarray, s1: np.ndarray, s2: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s1 / n
        var = np.maximum(s2 / n - mean * mean, 0.0)
        return np.where(mean > 0, var / mean, np.nan)


def spike_count_correlation(counts: Any) -> np.ndarray:
    """Pearson correlation matrix of spike counts over bins.

    Args:
        counts: (B, N) counts of N neurons in B bins.

    Returns:
        (N, N); NaN in the rows and columns of neurons whose count never varies.
    """
    c = np.asarray(counts, dtype=np.float64)
    return _corr(float(c.shape[0]), c.sum(0), c.T @ c)


def _corr(n: float, s1: np.ndarray, sxy: np.ndarray) -> np.ndarray:
    if n < 2:
        return np.full((s1.size, s1.size), np.nan)
    mean = s1 / n
    cov = sxy / n - np.outer(mean, mean)
    sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = cov / np.outer(sd, sd)
    r[~np.isfinite(r)] = np.nan
    return np.clip(r, -1.0, 1.0)


def population_sparseness(counts: Any) -> np.ndarray:
    """Treves-Rolls population sparseness of each bin, normalized (Vinje & Gallant 2000):
    ``(1 - a) / (1 - 1/N)`` with ``a = (mean_i c_i)^2 / mean_i c_i^2``.

    Args:
        counts: (B, N) non-negative counts (or rates) of N >= 2 neurons in B bins.

    Returns:
        (B,) in [0, 1]: 0 when all neurons fire equally, 1 when one neuron fires; NaN for a
        bin without spikes.
    """
    c = np.asarray(counts, dtype=np.float64)
    n = c.shape[1]
    m1 = c.mean(axis=1)
    m2 = (c * c).mean(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        a = m1 * m1 / m2
        return np.where(m2 > 0, (1.0 - a) / (1.0 - 1.0 / n), np.nan)


def _nanmean(x: np.ndarray) -> float:
    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else float("nan")


# ---------------------------------------------------------------------- accumulator
class SpikeStats:
    """Streaming statistics of one spiking layer, fed one episode at a time.

    Memory is O(N^2) (the pairwise sums) whatever the number of episodes. ISIs, windows and
    bins never cross an episode boundary.

    Args:
        size: N, neurons.
        dt: neuron step in seconds (None: rates in spikes per step).
        sign: (N,) ±1 Dale signs (E: +1, I: -1), or None (one population "all").
        fano_window: window of the Fano factor, in steps.
        corr_bin: bin of the correlations and sparseness, in steps.
        saturation: spike probability per step at or above which a neuron is saturated.
    """

    def __init__(
        self,
        size: int,
        *,
        dt: float | None = None,
        sign: Any = None,
        fano_window: int = 100,
        corr_bin: int = 10,
        saturation: float = 0.9,
    ) -> None:
        n = int(size)
        for name, v in (("fano_window", fano_window), ("corr_bin", corr_bin)):
            if int(v) < 1:
                raise UserError(f"{name}={v} (give at least 1 step)")
        if dt is not None and not float(dt) > 0:
            raise UserError(f"dt={dt} (give the neuron step in seconds > 0, or None)")
        self.size = n
        self.dt = None if dt is None else float(dt)
        self.sign = None if sign is None else np.asarray(sign).astype(np.int8).reshape(-1)
        if self.sign is not None and self.sign.shape != (n,):
            raise UserError(f"sign has shape {self.sign.shape} for {n} neurons (give one ±1 each)")
        self.fano_window = int(fano_window)
        self.corr_bin = int(corr_bin)
        self.saturation = float(saturation)
        z = np.zeros
        self.episodes = 0
        self.steps = 0
        self.count = z(n)
        self.isi_n, self.isi_s1, self.isi_s2 = z(n), z(n), z(n)
        self.cv_ep_sum, self.cv_ep_n = z(n), z(n)  # per-episode ISI CVs: sum, episodes
        self.win_n, self.win_s1, self.win_s2 = 0, z(n), z(n)
        self.bin_n, self.bin_s1, self.bin_sxy = 0, z(n), z((n, n))
        self.bin_sq = z(n)  # per-neuron sum of squared bin counts (lifetime sparseness)
        self.pop_sparse_sum, self.pop_sparse_n = {}, {}
        # currents: sums of E, I, ext, E^2, I^2, E*I per neuron, and the step count
        self.cur_n = 0
        self.cur = {k: z(n) for k in ("e", "i", "x", "ee", "ii", "ei")}

    # -------------------------------------------------------------- feeding
    def add(self, spikes: Any, currents: Mapping[str, Any] | None = None) -> None:
        """Fold one episode in.

        Args:
            spikes: (T, N) 0/1 spikes of the episode.
            currents: optional ``{"exc", "inh", "ext"}`` (T, N) currents of the episode
                (see :func:`snrl.analysis.currents.synaptic_currents`).
        """
        s = _spikes(spikes)
        if s.shape[1] != self.size:
            raise UserError(f"spikes have {s.shape[1]} neurons, expected {self.size}")
        s = s.astype(np.float64, copy=False)
        self.episodes += 1
        self.steps += s.shape[0]
        self.count += s.sum(0)
        neuron, isi = _isis(s)
        cnt = np.bincount(neuron, minlength=self.size).astype(np.float64)
        s1 = np.bincount(neuron, isi, minlength=self.size)
        s2 = np.bincount(neuron, isi * isi, minlength=self.size)
        self.isi_n += cnt
        self.isi_s1 += s1
        self.isi_s2 += s2
        cv = _cv(cnt, s1, s2)
        ok = np.isfinite(cv)
        self.cv_ep_sum[ok] += cv[ok]
        self.cv_ep_n[ok] += 1
        if s.shape[0] >= self.fano_window:
            w = window_counts(s, self.fano_window)
            self.win_n += w.shape[0]
            self.win_s1 += w.sum(0)
            self.win_s2 += (w * w).sum(0)
        if s.shape[0] >= self.corr_bin:
            b = window_counts(s, self.corr_bin)
            self.bin_n += b.shape[0]
            self.bin_s1 += b.sum(0)
            self.bin_sq += (b * b).sum(0)
            self.bin_sxy += b.T @ b
            for pop, idx in self.populations().items():
                if idx.size >= 2:
                    ps = population_sparseness(b[:, idx])
                    ok = np.isfinite(ps)
                    self.pop_sparse_sum[pop] = self.pop_sparse_sum.get(pop, 0.0) + ps[ok].sum()
                    self.pop_sparse_n[pop] = self.pop_sparse_n.get(pop, 0) + int(ok.sum())
        if currents is not None:
            e = np.asarray(currents["exc"], dtype=np.float64)
            i = np.asarray(currents["inh"], dtype=np.float64)
            x = np.asarray(currents.get("ext", np.zeros_like(e)), dtype=np.float64)
            self.cur_n += e.shape[0]
            c = self.cur
            c["e"] += e.sum(0)
            c["i"] += i.sum(0)
            c["x"] += x.sum(0)
            c["ee"] += (e * e).sum(0)
            c["ii"] += (i * i).sum(0)
            c["ei"] += (e * i).sum(0)

    def populations(self) -> dict[str, np.ndarray]:
        """Neuron indices of each population: ``all``, and ``E``/``I`` with Dale signs."""
        pops = {"all": np.arange(self.size)}
        if self.sign is not None:
            pops["E"] = np.flatnonzero(self.sign > 0)
            pops["I"] = np.flatnonzero(self.sign < 0)
        return pops

    # -------------------------------------------------------------- results
    def neuron_stats(self) -> dict[str, np.ndarray]:
        """Per-neuron arrays (N,): ``rate``, ``cv_isi``, ``fano``, ``sparseness_lifetime``,
        and with currents ``current_exc``, ``current_inh``, ``current_ext``, ``ei_ratio``,
        ``ei_correlation`` (definitions in :data:`METRICS`)."""
        steps = max(self.steps, 1)
        p = self.count / steps
        out = {
            "rate": p / self.dt if self.dt is not None else p,
            "spike_probability": p,
            "cv_isi": np.where(self.isi_n >= 2, _cv(self.isi_n, self.isi_s1, self.isi_s2), np.nan),
            "cv_isi_episodes": np.divide(
                self.cv_ep_sum,
                self.cv_ep_n,
                out=np.full(self.size, np.nan),
                where=self.cv_ep_n > 0,
            ),
            "fano": _fano(np.full(self.size, float(self.win_n)), self.win_s1, self.win_s2)
            if self.win_n
            else np.full(self.size, np.nan),
        }
        with np.errstate(invalid="ignore", divide="ignore"):
            if self.bin_n:
                m1 = self.bin_s1 / self.bin_n
                m2 = self.bin_sq / self.bin_n
                life = (1.0 - m1 * m1 / m2) / (1.0 - 1.0 / self.bin_n)
                out["sparseness_lifetime"] = np.where(m2 > 0, life, np.nan)
            else:
                out["sparseness_lifetime"] = np.full(self.size, np.nan)
            if self.cur_n:
                c, n = self.cur, self.cur_n
                me, mi = c["e"] / n, c["i"] / n
                ve = np.maximum(c["ee"] / n - me * me, 0.0)
                vi = np.maximum(c["ii"] / n - mi * mi, 0.0)
                cov = c["ei"] / n - me * mi
                out["current_exc"] = me
                out["current_inh"] = mi
                out["current_ext"] = c["x"] / n
                out["ei_ratio"] = np.where(me > 0, -mi / me, np.nan)
                # corr(E, -I) = -cov(E, I) / (sd_E sd_I)
                r = -cov / np.sqrt(ve * vi)
                out["ei_correlation"] = np.where((ve > 1e-12) & (vi > 1e-12), r, np.nan)
        return out

    def correlation(self) -> np.ndarray:
        """(N, N) spike-count correlation matrix over all bins so far."""
        return _corr(float(self.bin_n), self.bin_s1, self.bin_sxy)

    def summary(self) -> dict[str, dict[str, float]]:
        """Per population (``all``, ``E``, ``I``): every :data:`METRICS` number that applies."""
        per = self.neuron_stats()
        corr = self.correlation()
        out: dict[str, dict[str, float]] = {}
        for pop, idx in self.populations().items():
            d: dict[str, float] = {"n_neurons": float(idx.size)}
            if idx.size:
                rate = per["rate"][idx]
                d["rate_mean"] = float(rate.mean())
                d["rate_median"] = float(np.median(rate))
                cv = np.where(self.isi_n[idx] >= 2, per["cv_isi"][idx], np.nan)
                d["cv_isi_mean"] = _nanmean(cv)
                d["cv_isi_episodes_mean"] = _nanmean(per["cv_isi_episodes"][idx])
                d["fano_mean"] = _nanmean(per["fano"][idx])
                sub = corr[np.ix_(idx, idx)]
                pairs = sub[np.triu_indices(idx.size, 1)]
                pairs = pairs[np.isfinite(pairs)]
                if pairs.size:
                    d["corr_mean"] = float(pairs.mean())
                    d["corr_std"] = float(pairs.std())
                    d["corr_q05"], d["corr_q95"] = map(float, np.quantile(pairs, [0.05, 0.95]))
                else:
                    d.update(
                        dict.fromkeys(("corr_mean", "corr_std", "corr_q05", "corr_q95"), np.nan)
                    )
                n_sp = self.pop_sparse_n.get(pop, 0)
                d["sparseness_population"] = (
                    self.pop_sparse_sum[pop] / n_sp if n_sp else float("nan")
                )
                d["sparseness_lifetime"] = _nanmean(per["sparseness_lifetime"][idx])
                p = per["spike_probability"][idx]
                d["fraction_silent"] = float(np.mean(self.count[idx] == 0))
                d["fraction_saturated"] = float(np.mean(p >= self.saturation))
                if self.cur_n:
                    d["current_exc_mean"] = float(per["current_exc"][idx].mean())
                    d["current_inh_mean"] = float(per["current_inh"][idx].mean())
                    d["current_ext_mean"] = float(per["current_ext"][idx].mean())
                    d["ei_ratio"] = _nanmean(per["ei_ratio"][idx])
                    d["ei_correlation"] = _nanmean(per["ei_correlation"][idx])
            out[pop] = d
        return out
