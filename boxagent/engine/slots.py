"""Which queued runs start now, and on which GPUs: whole GPUs, never shared between runs.

The policy, first fit in submission order:
- a run with `gpus = "all"` (the default) has the box to itself: it starts only when no run is
  running, and while it waits nothing queued after it starts;
- a run with `gpus = N` starts when N GPUs are free, on the lowest free indices; while it waits, a
  later run may start if what it needs is free now (a later, smaller run can start earlier);
- a run with `gpus = 0` (data prep, aggregation) runs beside the others, at most `max_parallel`
  such runs at once (config.json `max_parallel`; default the number of GPUs, at least 1).
A big run can wait while smaller later ones keep fitting; submit it with "all", or in front of
them, when it must not wait.

Other tenants (gotcha U11: a process rgt did not start held 20.6 GiB and the next run's OOM
looked like its own): a GPU whose memory processes rgt did not start fill beyond
`SHARED_PCT` % is handed out last, and a run that gets one anyway says so (Start.shared,
written into its start event).
"""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from boxagent.health.tenants import SHARED_PCT

ALL = "all"




class Gpu(NamedTuple):
    index: int      # type: ignore[assignment]  # the NVML index; shadows tuple.index, never called on a Gpu
    uuid: Optional[str]
    taken_bytes: Optional[int] = None   # memory held by processes rgt did not start
    total_bytes: Optional[int] = None
    tenants: str = ""                   # who they are, in words ("pid 609 (python3 x.py) holds 20.6 GB")


class Start(NamedTuple):
    run: Any                       # a records.Run
    gpus: Optional[List[Gpu]]      # None: the whole box ("all"); [] for gpus = 0
    refused: Optional[str] = None  # it can never start here: why
    shared: Optional[str] = None   # some of its GPUs are filled by another tenant: who


def taken_pct(g: Gpu) -> float:
    if not g.taken_bytes or not g.total_bytes:
        return 0.0
    return 100.0 * g.taken_bytes / g.total_bytes


def shared_note(gpus: Optional[List[Gpu]], limit: float = SHARED_PCT) -> Optional[str]:
    """'GPU 0 is 25% filled by processes rgt did not start: pid 609 ...' or None."""
    notes = ["GPU %d is %.0f%% filled by processes rgt did not start: %s" % (g.index, taken_pct(g), g.tenants)
             for g in gpus or [] if taken_pct(g) > limit]
    return "; ".join(notes) or None


def wanted(spec: Dict[str, Any]) -> Any:
    return spec.get("gpus", ALL)


def plan(queued: Sequence[Any], running: Sequence[Any], specs: Dict[str, Dict[str, Any]],
         box: Optional[List[Gpu]], max_parallel: Optional[int], shared_pct: float = SHARED_PCT) -> List[Start]:
    """The runs of `queued` (submission order) to start now, each with its GPUs. `box` None:
    the GPUs are not known yet (no sample taken): runs that want some wait."""
    if any(r.gpus is None for r in running):
        return []                                        # an "all" run has the box
    known = box is not None
    box = box or []
    # A run whose stages are all done only waits for its manifest: its GPUs are free again.
    busy = {i for r in running if not r.all_done() for i in (r.gpus or [])}
    free = sorted((g for g in box if g.index not in busy), key=lambda g: taken_pct(g) > shared_pct)
    cpu_only = sum(1 for r in running if r.gpus == [])
    cpu_cap = max_parallel if max_parallel else max(1, len(box))
    starts: List[Start] = []
    for run in queued:
        want = wanted(specs[run.name])
        if want == ALL:
            if not running and not starts:
                starts.append(Start(run, None, shared=shared_note(box, shared_pct)))
            break                                         # it waits for the box, and blocks the rest
        if want == 0:
            if cpu_only < cpu_cap:
                cpu_only += 1
                starts.append(Start(run, []))
            continue
        if not known:
            continue
        if want > len(box):
            starts.append(Start(run, None, "the run asks for %d GPU(s); this box has %d" % (want, len(box))))
            continue
        if len(free) >= want:
            taken, free = free[:want], free[want:]
            starts.append(Start(run, sorted(taken), shared=shared_note(taken, shared_pct)))
    return starts


def stage_env(gpus: Optional[List[Gpu]]) -> Dict[str, str]:
    """What a stage of a run on these GPUs gets. By UUID, never by bare index: CUDA's default
    device order is not NVML's PCI order, so `CUDA_VISIBLE_DEVICES=3` may be another GPU."""
    if gpus is None:
        return {}
    return {"CUDA_VISIBLE_DEVICES": ",".join(g.uuid or str(g.index) for g in gpus),
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "RGT_GPUS": ",".join(str(g.index) for g in gpus)}
