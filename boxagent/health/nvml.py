"""The one NVML seam: every call into pynvml (nvidia-ml-py) goes through `Nvml.query`.

gpustat/nvitop style: pynvml is imported lazily inside try/except (the agent must import with
`python3 -S` on a box with no driver); init happens once under a lock and handles are opened
once; a failing field becomes None (NOT_SUPPORTED is normal on consumer cards and in some
containers) and never loses the sample; GPU_IS_LOST marks that GPU lost (an entry, not a crash).

Tests load a fake libnvidia-ml.so.1 under the REAL pynvml, either through LD_LIBRARY_PATH in a
subprocess (pynvml does CDLL("libnvidia-ml.so.1")) or in-process through RGT_NVML_LIB, which
this module preloads with ctypes and hands to pynvml as its library.
"""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

# NVML return codes (nvml.h); kept here so the seam does not need pynvml to name them.
NOT_SUPPORTED, GPU_IS_LOST, TIMEOUT, FUNCTION_NOT_FOUND = 3, 15, 10, 13
LIBRARY_NOT_FOUND, DRIVER_NOT_LOADED, NO_PERMISSION = 12, 9, 4
XID_CRITICAL_EVENT = 0x8   # nvmlEventTypeXidCriticalError

# Clock-event (throttle) reason bits -> NVML names in snake_case (STYLE 3).
CLOCK_EVENT_REASONS = (
    (0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"), (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"), (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
_MISSING = object()


def reason_names(mask: Optional[int]) -> Optional[List[str]]:
    if mask is None:
        return None
    return [name for bit, name in CLOCK_EVENT_REASONS if mask & bit]


def _unavailable_reason(exc: BaseException) -> str:
    code = getattr(exc, "value", None)
    if code == LIBRARY_NOT_FOUND:
        return "libnvidia-ml.so.1 not found (no NVIDIA driver on this box or not mapped into the container)"
    if code == DRIVER_NOT_LOADED:
        return "NVIDIA driver not loaded (nvmlInit: Driver Not Loaded)"
    if code == NO_PERMISSION:
        return "no permission to use NVML (/dev/nvidia* not accessible)"
    return "NVML init failed: %s" % (exc,)


class GpuHandle:
    """One GPU as NVML knows it; static facts cached after the first successful read."""

    def __init__(self, index: int, handle: Any):
        self.index = index
        self.handle = handle
        self.lost = False
        self.static: Dict[str, Any] = {}

    def address(self) -> Optional[int]:
        try:
            return ctypes.cast(self.handle, ctypes.c_void_p).value
        except (TypeError, ctypes.ArgumentError):
            return None


class Nvml:
    """Lazily initialised NVML with a single query function (`query`)."""

    def __init__(self, lib_path: Optional[str] = None):
        self.lib_path = lib_path if lib_path is not None else os.environ.get("RGT_NVML_LIB") or None
        self._lock = threading.Lock()
        self._started = False
        self.pynvml: Any = None
        self.available = False
        self.missing = False   # True: no NVML library/binding at all (not a failing driver)
        self.reason: Optional[str] = "not started"
        self.gpus: List[GpuHandle] = []
        self.driver_version: Optional[str] = None
        self.cuda_version: Optional[str] = None
        self.nvml_version: Optional[str] = None

    # -- life cycle --------------------------------------------------------------------------
    def start(self) -> bool:
        """Init once; True when NVML answers. Never raises: the reason says why not."""
        with self._lock:
            if self._started:
                return self.available
            self._started = True
            try:
                self._init()
            except Exception as exc:  # noqa: BLE001 - any failure means "no GPUs", with a reason
                self.available = False
                self.missing = getattr(exc, "value", None) == LIBRARY_NOT_FOUND
                self.reason = _unavailable_reason(exc)
            return self.available

    def _init(self) -> None:
        try:
            import pynvml  # noqa: F401 - bundled inside rgt-agent.pyz
        except ImportError:
            self.reason, self.missing = "pynvml (nvidia-ml-py) is not importable", True
            return
        self.pynvml = pynvml
        if self.lib_path:
            if not os.path.exists(self.lib_path):
                self.reason, self.missing = "NVML library %s not found" % self.lib_path, True
                return
            self._preload(self.lib_path)
        pynvml.nvmlInit()
        self.available, self.reason = True, None
        self.driver_version = self.query(pynvml.nvmlSystemGetDriverVersion)
        cuda = self.query(pynvml.nvmlSystemGetCudaDriverVersion)
        self.cuda_version = "%d.%d" % (cuda // 1000, (cuda % 1000) // 10) if isinstance(cuda, int) else None
        count = self.query(pynvml.nvmlDeviceGetCount) or 0
        for i in range(count):
            handle, code = self.call(pynvml.nvmlDeviceGetHandleByIndex, i)
            g = GpuHandle(i, handle)
            g.lost = code == GPU_IS_LOST
            if code is not None and not g.lost:
                g.static["error"] = "nvmlDeviceGetHandleByIndex failed (NVML error %d)" % code
            self.gpus.append(g)

    def _preload(self, path: str) -> None:
        """In-process seam: hand pynvml our library (it only loads one when nvmlLib is None)."""
        p = self.pynvml
        lib = ctypes.CDLL(path)
        with p.libLoadLock:
            if getattr(p.nvmlLib, "_name", None) != getattr(lib, "_name", None):
                p.nvmlLib = lib
                p._nvmlGetFunctionPointer_cache.clear()

    def shutdown(self) -> None:
        with self._lock:
            if self.available and self.pynvml is not None:
                self.query(self.pynvml.nvmlShutdown)
            self.available = False
            self._started = False
            self.gpus = []
            self.reason = "shut down"

    # -- the one query function ---------------------------------------------------------------
    def query(self, fn: Callable[..., Any], *args: Any, default: Any = None,
              gpu: Optional[GpuHandle] = None) -> Any:
        """Call fn(*args); on any NVML error return `default`. GPU_IS_LOST marks `gpu` lost."""
        value, code = self.call(fn, *args)
        if code is None:
            return value
        if code == GPU_IS_LOST and gpu is not None:
            gpu.lost = True
        return default

    def call(self, fn: Callable[..., Any], *args: Any) -> Tuple[Any, Optional[int]]:
        """(value, None) or (None, nvml error code); the raw form for callers that care."""
        try:
            return fn(*args), None
        except Exception as exc:  # noqa: BLE001 - NVMLError and ctypes errors alike
            code = getattr(exc, "value", None)
            return None, code if isinstance(code, int) else -1

    def first(self, names: Tuple[str, ...], *args: Any, gpu: Optional[GpuHandle] = None) -> Any:
        """The first of several pynvml functions that exists (names change across versions)."""
        for name in names:
            fn = getattr(self.pynvml, name, None)
            if fn is None:
                continue
            value, code = self.call(fn, *args)
            if code is None:
                return value
            if code == GPU_IS_LOST and gpu is not None:
                gpu.lost = True
                return None
            if code not in (FUNCTION_NOT_FOUND, -1):
                return None
        return None

    # -- sampling -----------------------------------------------------------------------------
    def sample(self, proc_root: str = "/proc") -> List[Dict[str, Any]]:
        """gpus[] for status.json (DESIGN field names); [] when NVML is unavailable."""
        if not self.start():
            return []
        return [self.sample_gpu(g, proc_root) for g in self.gpus]

    def _static(self, g: GpuHandle) -> Dict[str, Any]:
        """Name, uuid, bus id and max SM clock never change: read once, retry while None."""
        p, s, h = self.pynvml, g.static, g.handle
        if s.get("name") is None:
            s["name"] = self.query(p.nvmlDeviceGetName, h, gpu=g)
        if s.get("uuid") is None:
            s["uuid"] = self.query(p.nvmlDeviceGetUUID, h, gpu=g)
        if s.get("pci_bus_id") is None:
            pci = self.query(p.nvmlDeviceGetPciInfo, h, gpu=g)
            bus = getattr(pci, "busId", None)
            s["pci_bus_id"] = bus.decode("ascii", "replace") if isinstance(bus, bytes) else bus
        if s.get("sm_clock_max_mhz") is None:
            s["sm_clock_max_mhz"] = self.query(p.nvmlDeviceGetMaxClockInfo, h, 1, gpu=g)
        return s

    def sample_gpu(self, g: GpuHandle, proc_root: str = "/proc") -> Dict[str, Any]:
        entry: Dict[str, Any] = {"index": g.index, "name": None, "uuid": None, "pci_bus_id": None,
                                 "util_pct": None, "memory_used_bytes": None,
                                 "memory_total_bytes": None, "temperature_c": None,
                                 "power_w": None, "sm_clock_mhz": None, "sm_clock_max_mhz": None,
                                 "throttle_reasons": None, "ecc_uncorrected": None,
                                 "remapped_rows_pending": None, "remapped_rows_failed": None,
                                 "processes": [], "lost": g.lost, "xid_last": None}
        if g.handle is None or g.lost:
            entry.update({k: v for k, v in g.static.items()})
            return entry
        entry.update(self._static(g))
        if not g.lost:
            self._dynamic(g, entry, proc_root)
        entry["lost"] = g.lost
        return entry

    def _dynamic(self, g: GpuHandle, e: Dict[str, Any], proc_root: str) -> None:
        p, h = self.pynvml, g.handle
        util = self.query(p.nvmlDeviceGetUtilizationRates, h, gpu=g)
        e["util_pct"] = getattr(util, "gpu", None)
        if g.lost:
            return  # one failed probe is enough: skip the rest of a lost GPU's fields
        mem = self.query(p.nvmlDeviceGetMemoryInfo, h, gpu=g)
        e["memory_used_bytes"], e["memory_total_bytes"] = getattr(mem, "used", None), getattr(mem, "total", None)
        e["temperature_c"] = self.query(p.nvmlDeviceGetTemperature, h, 0, gpu=g)
        mw = self.query(p.nvmlDeviceGetPowerUsage, h, gpu=g)
        e["power_w"] = round(mw / 1000.0, 1) if isinstance(mw, int) else None
        e["sm_clock_mhz"] = self.query(p.nvmlDeviceGetClockInfo, h, 1, gpu=g)
        e["throttle_reasons"] = reason_names(self.first(
            ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"), h, gpu=g))
        # volatile (since driver load) uncorrected ECC: an increase means corrupted memory now
        e["ecc_uncorrected"] = self.query(p.nvmlDeviceGetTotalEccErrors, h, 1, 0, gpu=g)
        rows = self.query(p.nvmlDeviceGetRemappedRows, h, gpu=g)
        if isinstance(rows, tuple) and len(rows) == 4:
            e["remapped_rows_pending"], e["remapped_rows_failed"] = rows[2], rows[3]
        e["processes"] = self._processes(g, proc_root)

    def _processes(self, g: GpuHandle, proc_root: str, limit: int = 16) -> List[Dict[str, Any]]:
        """Compute processes holding VRAM; `visible` False = not in this PID namespace
        (another container or the host): reported, never killed."""
        procs = self.query(self.pynvml.nvmlDeviceGetComputeRunningProcesses, g.handle, gpu=g) or []
        out = []
        for pr in procs[:limit]:
            pid = getattr(pr, "pid", None)
            if not isinstance(pid, int):
                continue
            out.append({"pid": pid, "used_memory_bytes": getattr(pr, "usedGpuMemory", None),
                        "visible": os.path.exists(os.path.join(proc_root, str(pid)))})
        return out

    # -- Xid events ---------------------------------------------------------------------------
    def event_set(self) -> Tuple[Any, List[int]]:
        """(event set, indexes registered for Xid critical errors); (None, []) if unsupported."""
        if not self.start():
            return None, []
        p = self.pynvml
        es, code = self.call(p.nvmlEventSetCreate)
        if code is not None:
            return None, []
        registered = []
        for g in self.gpus:
            if g.handle is None or g.lost:
                continue
            _, code = self.call(p.nvmlDeviceRegisterEvents, g.handle, XID_CRITICAL_EVENT, es)
            if code is None:
                registered.append(g.index)
        if not registered:
            self.call(p.nvmlEventSetFree, es)
            return None, []
        return es, registered

    def wait_event(self, es: Any, timeout_ms: int) -> Tuple[Optional[Tuple[Optional[int], int]], Optional[int]]:
        """((gpu index, xid) or None on timeout, error code)."""
        data, code = self.call(self.pynvml.nvmlEventSetWait, es, timeout_ms)
        if code is not None:
            return None, (None if code == TIMEOUT else code)
        if getattr(data, "eventType", 0) != XID_CRITICAL_EVENT:
            return None, None
        addr = ctypes.cast(data.device, ctypes.c_void_p).value
        index = next((g.index for g in self.gpus if g.address() == addr), None)
        return (index, int(data.eventData)), None

    def free_event_set(self, es: Any) -> None:
        if es is not None and self.pynvml is not None:
            self.call(self.pynvml.nvmlEventSetFree, es)
