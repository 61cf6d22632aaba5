"""GPU faults (Xid, ECC increase, GPU lost) from every source, deduplicated and kept in a log.

A stage's diagnosis asks `since(t0)`; the preflight asks `hard_faults_present()`.
Kernel-log Xids are matched to this box's GPUs by PCI bus id: on a shared host the kernel log
shows every tenant's GPUs, and another tenant's Xid 79 says nothing about ours.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Deque, Dict, List, Optional, Tuple

from boxagent.health import xid as xidmod
from boxagent.health import xidcatalog
from boxagent.base.units import iso_utc

_DEDUPE_S = 10.0  # NVML event and kernel line for the same Xid arrive within ms of each other


class FaultLog:
    def __init__(self, maxlen: int = 500):
        self.log: Deque[Dict[str, Any]] = deque(maxlen=maxlen)
        self.boot: List[Dict[str, Any]] = []     # kernel-log Xids already there when we started
        self.other_gpus = 0                      # kernel-log Xids of GPUs not ours (ignored)
        # keyed by the sample's "index" as given: a GPU entry read back from JSON may lack it,
        # and then its readings still compare against the last entry that lacked it too
        self._ecc: Dict[Optional[int], int] = {}
        self._lost: Dict[Optional[int], bool] = {}

    # -- sources ---------------------------------------------------------------------------
    def xid(self, code: int, gpu: Optional[int], bus: Optional[str], at: float, source: str,
            detail: str = "", pid: Optional[int] = None, process: Optional[str] = None) -> Optional[Dict[str, Any]]:
        """Record an Xid unless the other source already reported it (then the kernel line's
        pid and process name join that fault); the new fault or None."""
        for f in reversed(self.log):
            if f["at"] < at - _DEDUPE_S:
                break
            if f["type"] == "gpu_xid" and f["code"] == code and f.get("gpu") == gpu and source not in f["source"]:
                f["source"] += "+" + source
                if pid is not None and f.get("pid") is None:
                    f.update(pid=pid, process=process, owner=None)
                return None
        return self._add(xid_fault(code, gpu, bus, at, source, detail, pid, process))

    def kernel_lines(self, lines: List[Tuple[Optional[float], str]], gpus: List[Dict[str, Any]],
                     accept_unmatched: bool, now: float, boot_wall: Optional[float],
                     history: bool = False) -> List[Dict[str, Any]]:
        """Parse kernel-log lines; faults for our GPUs (all GPUs when `accept_unmatched`)."""
        by_bus = {xidmod.normalize_bus_id(g.get("pci_bus_id")): g.get("index") for g in gpus if g.get("pci_bus_id")}
        out = []
        for ts, line in lines:
            p = xidmod.parse_xid_line(line)
            if p is None:
                continue
            gpu = by_bus.get(p["pci_bus_id"])
            if gpu is None and not accept_unmatched:
                self.other_gpus += 1
                continue
            if history:
                at = boot_wall + ts if (boot_wall is not None and ts is not None) else 0.0
                self.boot.append({"type": "gpu_xid", "code": p["code"], "gpu": gpu, "pci_bus_id": p["pci_bus_id"],
                                  "at": at, "source": "kmsg", "hardware": xidmod.is_hardware(p["code"]),
                                  "summary": "%s on %s since boot" % (xidmod.describe(p["code"]), p["bus_raw"]),
                                  "evidence": [line.strip()[:300]]})
                continue
            # when the driver logged it, not when we read it: a line read after the next stage
            # started is still the last stage's. The kernel's clock is trusted within a minute of
            # now only (a suspended box or a replayed log would place it anywhere).
            logged = boot_wall + ts if (boot_wall is not None and ts is not None) else None
            at = logged if logged is not None and now - 60.0 <= logged <= now else now
            f = self.xid(p["code"], gpu, p["pci_bus_id"], at, "kmsg", p["detail"], p["pid"], p["process_name"])
            if f is not None:
                out.append(f)
        return out

    def gpu_changes(self, gpus: List[Dict[str, Any]], now: float) -> List[Dict[str, Any]]:
        """ECC uncorrected increases and newly lost GPUs, against the previous sample."""
        out = []
        for g in gpus:
            i = g.get("index")
            ecc, last = g.get("ecc_uncorrected"), self._ecc.get(i)
            if isinstance(ecc, int):
                if last is not None and ecc > last:
                    out.append(self._add({"type": "gpu_ecc", "gpu": i, "at": now, "source": "nvml",
                                          "hardware": True, "pci_bus_id": g.get("pci_bus_id"),
                                          "summary": "GPU %s uncorrected ECC errors rose %d -> %d: memory is corrupting data" % (i, last, ecc),
                                          "evidence": ["volatile uncorrected ECC %d -> %d" % (last, ecc)]}))
                self._ecc[i] = ecc
            if g.get("lost") and not self._lost.get(i):
                out.append(self._add({"type": "gpu_lost", "gpu": i, "at": now, "source": "nvml",
                                      "hardware": True, "pci_bus_id": g.get("pci_bus_id"),
                                      "summary": "GPU %s lost (NVML GPU_IS_LOST)" % i,
                                      "evidence": ["NVML GPU_IS_LOST on GPU %s" % i]}))
            self._lost[i] = bool(g.get("lost"))
        return out

    def _add(self, fault: Dict[str, Any]) -> Dict[str, Any]:
        self.log.append(fault)
        return fault

    # -- readers ---------------------------------------------------------------------------
    def since(self, t0: float) -> List[Dict[str, Any]]:
        return [public(f) for f in self.log if f["at"] >= t0]

    def hard_faults_present(self) -> List[Dict[str, Any]]:
        """Hardware Xids since boot (kernel log) or since we started (any source), lost GPUs."""
        return [public(f) for f in list(self.boot) + list(self.log) if f.get("hardware")]

    def claim(self, faults: List[Dict[str, Any]], run: str, stage: Optional[str]) -> None:
        """A stage that ended reports these application Xids as its own: no alert for them."""
        keys = {(f.get("code"), f.get("gpu"), f.get("at")) for f in faults}
        for f in self.log:
            if f.get("xid_class") == "application" and (f.get("code"), f.get("gpu"), f.get("at")) in keys:
                f["claimed"] = [run, stage]

    def unowned(self) -> List[Dict[str, Any]]:
        """Xids that name a pid whose owner is not looked up yet (the monitor asks /proc)."""
        return [f for f in self.log if f.get("pid") is not None and f.get("owner") is None]

    def last_xid(self, gpu: Optional[int]) -> Optional[Dict[str, Any]]:
        """The GPU's last Xid that says something about the GPU: an application's own fault
        (Xid 31 by a job's kernel) is that process's, never `gpu0 ... Xid 31` on the status line."""
        for f in reversed(self.log):
            if f["type"] == "gpu_xid" and f.get("gpu") == gpu and f.get("xid_class") != "application":
                return {"code": f["code"], "at": iso_utc(f["at"]), "source": f["source"]}
        return None


def xid_fault(code: int, gpu: Optional[int], bus: Optional[str], at: float, source: str,
              detail: str = "", pid: Optional[int] = None, process: Optional[str] = None) -> Dict[str, Any]:
    """One Xid, with what NVIDIA's catalog says of it (class, action) and who faulted (pid)."""
    row = xidcatalog.lookup(code)
    hw = xidcatalog.is_hardware(code)
    where = "GPU %s" % gpu if gpu is not None else "a GPU"
    return {"type": "gpu_xid", "code": code, "gpu": gpu, "pci_bus_id": bus, "at": at,
            "source": source, "hardware": hw, "critical": xidcatalog.is_critical(code),
            "xid_class": xidcatalog.klass(code), "action": row.action if row else None,
            "pid": pid, "process": process, "owner": None,
            "summary": "%s on %s%s" % (xidmod.describe(code), where,
                                       ": stop and re-rent another box" if hw else ""),
            "evidence": ["%s Xid %d on %s%s" % ("NVML event" if source == "nvml" else "kernel log",
                                                code, bus or where, (" (" + detail + ")") if detail else "")]}


def public(f: Dict[str, Any]) -> Dict[str, Any]:
    """The contract's shape: at as wall-clock seconds, plus an ISO copy for humans."""
    out = dict(f)
    out["at_iso"] = iso_utc(f["at"]) if f.get("at") else None
    return out
