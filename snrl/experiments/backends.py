"""Where the runs of a comparison execute: a local process pool or Ray tasks.

Both call :func:`snrl.experiments.execution.execute_run` once per run and hand each run
record to ``on_result`` as it arrives; a worker that dies fails only its own run.

``run_local``: a ``concurrent.futures`` process pool whose workers fork from a
``forkserver`` that has imported snrl (one torch thread each, and each exits as soon as the
compare process is gone). ``run_ray``: Ray tasks of one CPU each, at most ``workers`` in
flight, on an existing cluster (``address``) or a local instance started and stopped here.
On a multi-node cluster the comparison directory must be mounted at the same path on every
node.

GPUs: a run whose config has ``device="cuda"`` runs on "its" GPU. Locally, each worker
process sees one of the visible GPUs (``CUDA_VISIBLE_DEVICES`` set per worker, round
robin), so the runs spread over them. On Ray, ``gpus_per_run`` is each task's GPU share
(0.25 packs four runs on one GPU) and Ray sets the task's ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing as mp
import os
import re
import socket
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from snrl.errors import UserError, describe, first_line
from snrl.experiments.execution import execute_run, failed_record
from snrl.experiments.spec import RunSpec

__all__ = [
    "check_reachable",
    "default_workers",
    "import_ray",
    "ray_session",
    "run_local",
    "run_ray",
]

#: Receives each run record as it arrives.
OnResult = Callable[[dict[str, Any]], None]


def _exit_when_gone(pid: int) -> None:
    """Exit this worker as soon as process ``pid`` (the compare process) has ended, so no
    orphan keeps writing into a run directory that a re-run resumes.

    A daemon thread waits on a pidfd (Linux >= 5.3; readable once the process has exited)
    or else polls ``os.kill(pid, 0)`` once a second. The worker's own parent is the
    forkserver, not the compare process, so ``PR_SET_PDEATHSIG`` alone would not do.
    """
    import select
    import threading

    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None

    def watch() -> None:
        if fd is not None:
            select.select([fd], [], [])
        else:
            while True:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                except OSError:
                    pass
                time.sleep(1.0)
        os._exit(70)

    threading.Thread(target=watch, name="snrl-compare-watchdog", daemon=True).start()


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` names them (its own list
    when set, else ``0 .. n-1`` for the CUDA devices torch sees; none without CUDA)."""
    text = os.environ.get("CUDA_VISIBLE_DEVICES")
    if text is not None:
        return [g.strip() for g in text.split(",") if g.strip()]
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return [str(i) for i in range(n)]


def worker_gpu(index: int, gpus: Sequence[str]) -> str | None:
    """The GPU worker ``index`` of a local pool takes (round robin), or None without GPUs."""
    return gpus[index % len(gpus)] if gpus else None


def _init_worker(
    parent_pid: int, sys_path: Sequence[str] = (), gpus: Sequence[str] = (), counter: Any = None
) -> None:
    if gpus and counter is not None:  # before torch initializes CUDA in this worker
        with counter.get_lock():
            index = counter.value
            counter.value += 1
        os.environ["CUDA_VISIBLE_DEVICES"] = worker_gpu(index, gpus)
    import torch

    _exit_when_gone(parent_pid)
    # like ``spawn``: the caller's import path at the time of the call (user env modules)
    sys.path[:0] = [p for p in sys_path if p not in sys.path]
    torch.set_num_threads(1)


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _mp_context() -> Any:
    """Workers fork from a server process that has imported snrl once (Linux
    ``forkserver``: fast start, no threads inherited from this process); ``spawn`` elsewhere."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    with contextlib.suppress(Exception):
        ctx.set_forkserver_preload(["snrl.experiments._forkserver"])
    return ctx


def run_local(
    specs: list[RunSpec], workers: int, on_result: OnResult, *, isolate: bool = False
) -> None:
    """Run ``specs`` in a process pool; a worker that dies (a crash outside Python)
    fails only its own run: the runs caught in the broken pool are retried one per pool."""
    ctx = _mp_context()
    broken: list[RunSpec] = []
    on_gpu = any(str(s.config.get("device", "cpu")).startswith("cuda") for s in specs)
    gpus = visible_gpus() if on_gpu else []
    with cf.ProcessPoolExecutor(
        max_workers=1 if isolate else workers,
        mp_context=ctx,
        initializer=_init_worker,
        initargs=(os.getpid(), list(sys.path), gpus, ctx.Value("i", 0) if gpus else None),
    ) as pool:
        futures = {pool.submit(execute_run, s): s for s in specs}
        try:
            for fut in cf.as_completed(futures):
                spec = futures[fut]
                try:
                    on_result(fut.result())
                except cf.process.BrokenProcessPool:
                    broken.append(spec)
        except BaseException:  # Ctrl-C, SIGTERM, an error recording a result
            _abandon(pool)
            raise
    if not broken:
        return
    if isolate:  # the single run of this pool killed its worker
        error = "worker process died (a crash outside Python, e.g. out of memory)"
        on_result(failed_record(broken[0], error))
        return
    for spec in broken:
        run_local([spec], 1, on_result, isolate=True)


def _abandon(pool: cf.ProcessPoolExecutor) -> None:
    """Start no queued run and stop the running ones now: leaving the pool's ``with`` block
    otherwise waits for every queued run (Ctrl-C stopped only the runs in progress, and the
    workers went on with the next ones, silently, to the end). A stopped run resumes from its
    last checkpoint when the comparison is run again."""
    # the workers of CPython's pool (no public handle; shutdown forgets them); runs write
    # their files atomically, so a terminated run leaves its last checkpoint whole
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in workers:
        with contextlib.suppress(Exception):
            proc.terminate()


def _parse_address(address: str) -> tuple[str, int] | None:
    text = address.strip()
    if text == "auto":
        return None
    text = re.sub(r"^[a-z]+://", "", text)
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise UserError(f"bad --address {address!r} (use HOST:PORT, ray://HOST:PORT or auto)")
    return host.strip("[]"), int(port)


def check_reachable(address: str, timeout: float = 5.0) -> None:
    hp = _parse_address(address)
    if hp is None:
        return
    try:
        with socket.create_connection(hp, timeout=timeout):
            pass
    except OSError as e:
        raise UserError(
            f"cannot reach the Ray cluster at {address} ({e.strerror or e}; start it with "
            "`ray start --head` and pass its address, or omit --address for a local instance)"
        ) from None


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError(
            "the ray backend needs Ray, which is not installed (pip install 'snrl[ray]')"
        ) from None
    return ray


@contextlib.contextmanager
def ray_session(address: str | None, num_cpus: int) -> Iterator[Any]:
    """Ray, joined at ``address`` or started locally with ``num_cpus`` CPUs (and shut down
    afterwards when started here); a Ray already initialized in this process is used as is.

    Raises:
        UserError: Ray missing, the cluster unreachable, or Ray failing to start.
    """
    ray = import_ray()
    if address:
        check_reachable(address)
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = dict(
            include_dashboard=False, log_to_driver=False, configure_logging=False
        )
        if address:
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = num_cpus
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = address or "local"
            raise UserError(f"cannot start or join Ray at {where}: {first_line(e)}") from None
        started = True
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def ray_gpu_limit(
    resources: dict[str, float], gpus_per_run: float | None, name: str = "gpus_per_run"
) -> int | None:
    """How many runs of ``gpus_per_run`` GPUs each fit on a cluster with ``resources``
    (None: runs take no GPU); :class:`UserError` when not one fits (Ray would wait
    forever). ``name``: the option's name in the message (``gpus_per_trial`` for tune)."""
    if not gpus_per_run:
        return None
    have = float(resources.get("GPU", 0))
    if have < gpus_per_run:
        flag = "--" + name.replace("_", "-")
        raise UserError(
            f"{name}={gpus_per_run:g} but the Ray cluster has {have:g} GPU(s) (run on a "
            f"cluster with GPUs, or drop {flag})"
        )
    return max(1, int(have / gpus_per_run + 1e-9))


def run_ray(
    specs: list[RunSpec],
    workers: int | None,
    address: str | None,
    on_result: OnResult,
    gpus_per_run: float | None = None,
) -> None:
    """Run ``specs`` as Ray tasks (one CPU and ``gpus_per_run`` GPUs each, at most
    ``workers`` in flight)."""
    with ray_session(address, workers or default_workers()) as ray:
        resources = ray.cluster_resources()
        gpu_limit = ray_gpu_limit(resources, gpus_per_run)
        task = ray.remote(num_cpus=1, num_gpus=gpus_per_run or 0, max_retries=0)(execute_run)
        limit = workers or max(1, int(resources.get("CPU", 1)))
        if gpu_limit is not None:
            limit = min(limit, gpu_limit)
        queue = list(specs)
        inflight: dict[Any, RunSpec] = {}
        while queue or inflight:
            while queue and len(inflight) < limit:
                spec = queue.pop(0)
                inflight[task.remote(spec._asdict())] = spec
            ready, _ = ray.wait(list(inflight), num_returns=1)
            for ref in ready:
                spec = inflight.pop(ref)
                try:
                    on_result(ray.get(ref))
                except Exception as e:  # the task's worker died
                    error = f"Ray task failed: {describe(e)}"
                    on_result(failed_record(spec, error))
