"""Each running run's share of the box, so that the runs' costs add up to what the box spent.

Charging every run the whole box's price for its wall time made 8 parallel 1-GPU runs add up
to 163.20 USD on a box that spent 21.67. The box's time is split instead, moment by moment:
  gpus = N      N / (the box's usable GPUs): its GPUs' share of the box
  gpus = "all"  the whole box (1.0): it has the box to itself (the default)
  gpus = 0      what no GPU run holds, split evenly between the gpus = 0 runs running then (a
                data-prep run on an otherwise idle box pays for the box; beside a full sweep it
                pays nothing)
What no run holds is the box's idle cost. So over any interval:
  box spend = sum of the runs' costs + idle cost.
On a box whose GPUs are not known (no sample yet, no NVML) every run counts as gpus = 0.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

ALL = "all"


def of(wants: Dict[str, Any], box_gpus: Optional[int]) -> Dict[str, float]:
    """run name -> its share (0..1) of the box, for the runs running now (name -> `gpus` wanted)."""
    shares: Dict[str, float] = {}
    zero = []
    for name, want in wants.items():
        if want == ALL:
            shares[name] = 1.0
        elif isinstance(want, int) and not isinstance(want, bool) and want > 0 and box_gpus:
            shares[name] = min(1.0, want / float(box_gpus))
        else:
            zero.append(name)
    held = sum(shares.values())
    if held > 1.0:                     # never more than the box (an adopted run on a changed box)
        shares = {k: v / held for k, v in shares.items()}
        held = 1.0
    for name in zero:
        shares[name] = (1.0 - held) / len(zero)
    return shares


def gpus_held(want: Any) -> int:
    """The GPUs a run on a cluster's nodes holds while it runs: its `gpus` (0 for "all" or
    none: on a cluster, "the whole box" names no box)."""
    return want if isinstance(want, int) and not isinstance(want, bool) and want > 0 else 0
