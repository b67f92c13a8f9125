"""Exports of recorded episodes to the field's formats: NWB (pynwb) and Neo.

Both are optional extras (``pip install 'snrl[export]'``), imported only when an export is
asked for. Episodes are collected one at a time (:class:`SpikeExport`): spike times are
kept sparse; membranes, observations, actions and rewards as float32.

Timeline: every episode starts where the previous one ended (episode k starts at the sum of
the earlier episodes' lengths, times ``dt``). A spike in neuron step t of an episode is at
``start + t * dt`` seconds (``dt``: the neuron step). The NWB file holds one ``Units`` table
(one row per neuron of every spiking layer: columns ``population`` (E/I/all), ``layer``,
``neuron_index``), the membranes as one ``TimeSeries`` per layer in ``acquisition``, the
observations, actions and rewards as ``TimeSeries`` in the ``behavior`` processing module,
the episodes as ``epochs`` and NeuroGym trials (when recorded) as the ``trials`` table with
their conditions as columns. Neo: a ``Block`` with a ``Segment`` per episode and a
``SpikeTrain`` per neuron (seconds, ``t_start``/``t_stop`` the episode's span,
``sampling_period`` = ``dt``, annotations ``layer``, ``population``, ``index``).
"""

from __future__ import annotations

import datetime
import uuid
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from snrl.errors import UserError
from snrl.io import atomic_path

__all__ = ["INSTALL", "SpikeExport", "read_nwb_spike_times", "require_extra"]

INSTALL = "pip install 'snrl[export]'"


def require_extra(module: str) -> Any:
    """Import ``module`` of the ``[export]`` extra, or raise a UserError naming the install
    line."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(
            f"exporting needs {module.split('.')[0]}, which is not installed ({INSTALL})"
        ) from None


def _population(sign: Any, j: int) -> str:
    if sign is None:
        return "all"
    return "E" if int(sign[j]) > 0 else "I"


class SpikeExport:
    """Episodes collected for export.

    Args:
        layers: the layers' descriptions (``traj.layers``); spiking layers are exported.
        dt: neuron step in seconds.
    """

    def __init__(self, layers: Sequence[Mapping[str, Any]], dt: float) -> None:
        self.layers = [dict(d) for d in layers if d["kind"] == "spiking"]
        if not self.layers:
            raise UserError("nothing to export: the network has no spiking layer")
        self.dt = float(dt)
        self.episodes: list[dict[str, Any]] = []
        self.start = 0  # neuron steps before the next episode

    def add(self, traj: Any) -> None:
        """Collect one episode (a :class:`snrl.Trajectory` or a stand-in with ``activity``,
        ``observations``, ``actions``, ``rewards`` and optionally ``trials``, ``substeps``)."""
        substeps = int(getattr(traj, "substeps", None) or 1)
        ep: dict[str, Any] = {"start": self.start, "layers": {}}
        steps = 0
        for d in self.layers:
            a = traj.activity[d["name"]]
            s = np.asarray(a.spikes)
            t, j = np.nonzero(s)
            ep["layers"][d["name"]] = {
                "t": t.astype(np.int64),
                "j": j.astype(np.int64),
                "v": None if a.v is None else np.asarray(a.v, dtype=np.float32),
            }
            steps = s.shape[0]
        ep["steps"] = steps
        ep["substeps"] = substeps
        ep["observations"] = np.asarray(traj.observations, dtype=np.float32).reshape(
            len(traj.observations), -1
        )
        ep["actions"] = np.asarray(traj.actions, dtype=np.float32).reshape(len(traj.actions), -1)
        ep["rewards"] = np.asarray(traj.rewards, dtype=np.float32)
        ep["trials"] = list(getattr(traj, "trials", None) or [])
        self.episodes.append(ep)
        self.start += steps

    def spike_times(self, episode: int, layer: str, neuron: int) -> np.ndarray:
        """Spike times (s) of one neuron in one episode, relative to the episode's start."""
        e = self.episodes[episode]["layers"][layer]
        return e["t"][e["j"] == neuron] * self.dt

    # ------------------------------------------------------------------ Neo
    def to_neo(self) -> Any:
        """A ``neo.Block``: a Segment per episode, a SpikeTrain per neuron."""
        neo = require_extra("neo")
        pq = require_extra("quantities")
        block = neo.Block(name="snrl spikes")
        for k, ep in enumerate(self.episodes):
            t0 = ep["start"] * self.dt
            t1 = (ep["start"] + ep["steps"]) * self.dt
            seg = neo.Segment(name=f"episode {k}", index=k)
            for d in self.layers:
                e = ep["layers"][d["name"]]
                for j in range(int(d["size"])):
                    times = t0 + e["t"][e["j"] == j] * self.dt
                    st = neo.SpikeTrain(
                        times * pq.s,
                        t_start=t0 * pq.s,
                        t_stop=t1 * pq.s,
                        sampling_rate=(1.0 / self.dt) * pq.Hz,
                        name=f"{d['name']}[{j}]",
                    )
                    st.annotate(layer=d["name"], population=_population(d.get("sign"), j), index=j)
                    seg.spiketrains.append(st)
            block.segments.append(seg)
        return block

    def write_neo(self, path: str | Path) -> Path:
        """Write :meth:`to_neo` with Neo's ``NeoMatlabIO`` (a ``.mat`` file), atomically."""
        io_mod = require_extra("neo.io")
        path = Path(path)
        block = self.to_neo()
        with atomic_path(path) as tmp:  # ends in .tmp: scipy's savemat adds no ".mat"
            io_mod.NeoMatlabIO(filename=str(tmp)).write_block(block)
        return path

    # ------------------------------------------------------------------ NWB
    def to_nwb(self, *, description: str = "snrl recording", meta: Mapping | None = None) -> Any:
        """A ``pynwb.NWBFile`` with the units, membranes, behaviour, epochs and trials."""
        pynwb = require_extra("pynwb")
        from pynwb.base import TimeSeries

        now = datetime.datetime.now(datetime.timezone.utc)
        nwb = pynwb.NWBFile(
            session_description=description,
            identifier=str(uuid.uuid4()),
            session_start_time=now,
            notes="; ".join(f"{k}={v}" for k, v in (meta or {}).items()) or None,
        )
        nwb.add_unit_column("population", "E (excitatory), I (inhibitory) or all (no Dale)")
        nwb.add_unit_column("layer", "the spiking layer's name in its backbone")
        nwb.add_unit_column("neuron_index", "the neuron's index in its layer")
        for d in self.layers:
            for j in range(int(d["size"])):
                times = (
                    np.concatenate(
                        [
                            (
                                ep["start"]
                                + ep["layers"][d["name"]]["t"][ep["layers"][d["name"]]["j"] == j]
                            )
                            * self.dt
                            for ep in self.episodes
                        ]
                    )
                    if self.episodes
                    else np.zeros(0)
                )
                nwb.add_unit(
                    spike_times=times,
                    population=_population(d.get("sign"), j),
                    layer=d["name"],
                    neuron_index=j,
                )
            vs = [ep["layers"][d["name"]]["v"] for ep in self.episodes]
            if vs and all(v is not None for v in vs):
                nwb.add_acquisition(
                    TimeSeries(
                        name=f"membrane_{d['name']}",
                        data=np.concatenate(vs),
                        unit="a.u.",
                        rate=1.0 / self.dt,
                        starting_time=0.0,
                        description=f"membrane potential of layer {d['name']} after each "
                        "neuron step (threshold units of the model), (time, neuron)",
                    )
                )
        behavior = nwb.create_processing_module("behavior", "the agent's env interaction")
        sub = self.episodes[0]["substeps"] if self.episodes else 1
        env_dt = self.dt * sub
        for key, desc in (
            ("observations", "observations seen before each env step, (step, feature)"),
            ("actions", "actions taken at each env step, (step, dim)"),
            ("rewards", "reward after each env step"),
        ):
            data = np.concatenate([ep[key] for ep in self.episodes]) if self.episodes else []
            behavior.add(
                TimeSeries(name=key, data=data, unit="a.u.", rate=1.0 / env_dt, description=desc)
            )
        for k, ep in enumerate(self.episodes):
            nwb.add_epoch(
                start_time=ep["start"] * self.dt,
                stop_time=(ep["start"] + ep["steps"]) * self.dt,
                tags=[f"episode {k}"],
            )
        trials = [(ep, t) for ep in self.episodes for t in ep["trials"]]
        if trials:
            conds = sorted({c for _, t in trials for c in (t.get("conditions") or {})})
            for name, desc in (
                ("correct", "the choice was correct"),
                ("gt", "ground truth"),
                ("choice", "the agent's choice (-1: none)"),
                *((f"condition_{c}", f"task condition {c}") for c in conds),
            ):
                nwb.add_trial_column(name, desc)
            for ep, t in trials:
                start = ep["start"] + int(t["start_step"]) * sub
                stop = ep["start"] + (int(t["end_step"]) + 1) * sub
                cond = t.get("conditions") or {}
                nwb.add_trial(
                    start_time=start * self.dt,
                    stop_time=stop * self.dt,
                    correct=bool(t.get("correct", False)),
                    gt=float(t["gt"]) if t.get("gt") is not None else np.nan,
                    choice=float(t["choice"]) if t.get("choice") is not None else -1.0,
                    **{f"condition_{c}": float(cond.get(c, np.nan)) for c in conds},
                )
        return nwb

    def write_nwb(self, path: str | Path, **kwargs: Any) -> Path:
        """Write :meth:`to_nwb` to an NWB (HDF5) file, atomically."""
        pynwb = require_extra("pynwb")
        path = Path(path)
        nwb = self.to_nwb(**kwargs)
        with warnings.catch_warnings():  # the temp name does not end in .nwb; the file will
            warnings.filterwarnings("ignore", message=".*does not end in '.nwb'")
            with atomic_path(path) as tmp, pynwb.NWBHDF5IO(str(tmp), "w") as io:
                io.write(nwb)
        return path


def read_nwb_spike_times(path: str | Path) -> list[dict[str, Any]]:
    """Every unit of an NWB file written by :meth:`SpikeExport.write_nwb`: dicts
    ``{"layer", "neuron_index", "population", "spike_times"}``."""
    pynwb = require_extra("pynwb")
    with pynwb.NWBHDF5IO(str(path), "r") as io:
        nwb = io.read()
        df = nwb.units.to_dataframe()
        return [
            {
                "layer": r.layer,
                "neuron_index": int(r.neuron_index),
                "population": r.population,
                "spike_times": np.asarray(r.spike_times, dtype=np.float64),
            }
            for r in df.itertuples()
        ]
