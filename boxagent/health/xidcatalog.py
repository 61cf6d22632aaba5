"""NVIDIA's Xid catalog as data: the one table every Xid decision in rgt reads.

Before this table the codes were listed three times (the health sampler, the triage precedence
and the log rules) and disagreed (63/64/119/120 were hardware in one and unknown in another).
On a real H100 a device-side assert logged Xid 43 and an out-of-bounds kernel write Xid 31, and
rgt raised both as box-wide GPU faults: they are the job's own bugs, and the catalog says so.

Each row: code -> (mnemonic, meaning in plain words, class, NVIDIA's immediate action).
  class   application  the faulting process's own code (a bad kernel, an out-of-bounds access):
                       the GPU is fine; the fault belongs to that process and its stage
          hardware     the GPU, its memory or its bus is failing: re-rent / drain
          driver       the driver, firmware or GSP is wedged: reset the GPU (or the box)
          engine       a copy/video engine error NVIDIA asks to restart the app for, and to
                       report if it repeats
          info         informational; NVIDIA says to ignore it
          unused       documented as unused on current GPUs
  action  NVIDIA's "Resolution Bucket (Immediate Action)": RESTART_APP, RESET_GPU, RESTART_BM
          (reboot), IGNORE, CONTACT_SUPPORT, WORKFLOW_* (a decision flow in the catalog),
          CHECK_MECHANICALS, UPDATE_SWFW, RESTART_VM.
SOURCE names the document and the driver branch the rows follow.
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional

# The rows (mnemonic, immediate action) follow the catalog's R610 spreadsheet as restated row by
# row in public fault-handling documentation; the spreadsheet itself was not at hand to diff.
# The plain-word meanings are ours.
SOURCE = ("NVIDIA Xid Catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), "
          "R610 driver branch: mnemonic and immediate action")


class Xid(NamedTuple):
    code: int
    mnemonic: str
    meaning: str
    klass: str
    action: str
    source: str = SOURCE


_ROWS = [
    (8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing (channel idle timeout)", "driver", "RESTART_APP"),
    (11, "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "invalid or corrupted push buffer stream", "application", "RESTART_APP"),
    (13, "ROBUST_CHANNEL_GR_EXCEPTION", "graphics engine exception: typically an out-of-bounds access "
     "or an illegal instruction in a kernel", "application", "RESTART_APP"),
    (14, "ROBUST_CHANNEL_FAKE_ERROR", "test error injected on purpose", "info", "IGNORE"),
    (25, "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "illegal push buffer stream", "application", "RESTART_APP"),
    (31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "an illegal memory access (GPU memory page fault)",
     "application", "RESTART_APP"),
    (32, "ROBUST_CHANNEL_PBDMA_ERROR", "invalid or corrupted push buffer stream (PBDMA)", "application", "RESTART_APP"),
    (37, "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "unimplemented firmware method", "info", "IGNORE"),
    (38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "firmware watchdog timeout", "info", "IGNORE"),
    (39, "ROBUST_CHANNEL_CE0_ERROR", "copy engine 0 error", "engine", "RESTART_APP"),
    (40, "ROBUST_CHANNEL_CE1_ERROR", "copy engine 1 error", "engine", "RESTART_APP"),
    (41, "ROBUST_CHANNEL_CE2_ERROR", "copy engine 2 error", "engine", "RESTART_APP"),
    (43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing the process's work (its "
     "channel was reset after a fault in its own kernel, e.g. a device-side assert)", "application", "IGNORE"),
    (44, "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "graphics engine fault during a context switch", "info", "IGNORE"),
    (45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "preemptive cleanup of a process's channels (it ended or "
     "was killed with work in flight)", "application", "WORKFLOW_XID_45"),
    (46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing (GPU timeout)", "driver", "RESET_GPU"),
    (48, "ROBUST_CHANNEL_GPU_ECC_DBE", "double-bit ECC error in GPU memory", "hardware", "WORKFLOW_XID_48"),
    (54, "SILENT_RUNNING_PWR_REDUCED_CLOCKING", "power reduced: clocks lowered (cooling/power supply)",
     "hardware", "CHECK_MECHANICALS"),
    (60, "ROBUST_CHANNEL_SEC2_ERROR", "security engine error", "driver", "RESTART_APP"),
    (62, "PMU_HALT_ERROR", "internal micro-controller halt", "driver", "RESET_GPU"),
    (63, "INFOROM_DRAM_RETIREMENT_EVENT", "ECC page retirement / row remapping recorded", "hardware", "IGNORE"),
    (64, "INFOROM_DRAM_RETIREMENT_FAILURE", "ECC page retirement / row remapping failed", "hardware", "RESET_GPU"),
    (66, "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "firmware register access violation", "info", "IGNORE"),
    (67, "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "firmware verification violation", "info", "IGNORE"),
    (68, "ROBUST_CHANNEL_NVDEC0_ERROR", "video decoder exception", "application", "RESTART_APP"),
    (69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "graphics engine class error (an illegal method from the "
     "process)", "application", "RESTART_APP"),
    (70, "ROBUST_CHANNEL_CE3_ERROR", "copy engine 3 error", "engine", "RESTART_APP"),
    (71, "ROBUST_CHANNEL_CE4_ERROR", "copy engine 4 error", "engine", "RESTART_APP"),
    (72, "ROBUST_CHANNEL_CE5_ERROR", "copy engine 5 error", "engine", "RESTART_APP"),
    (74, "NVLINK_ERROR", "NVLink error", "hardware", "WORKFLOW_NVLINK_ERR"),
    (75, "ROBUST_CHANNEL_CE6_ERROR", "copy engine 6 error", "engine", "RESTART_APP"),
    (76, "ROBUST_CHANNEL_CE7_ERROR", "copy engine 7 error", "engine", "RESTART_APP"),
    (77, "ROBUST_CHANNEL_CE8_ERROR", "copy engine 8 error", "engine", "RESTART_APP"),
    (78, "VGPU_START_ERROR", "vGPU start error", "driver", "UPDATE_SWFW"),
    (79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", "hardware", "RESTART_BM"),
    (80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", "corrupted data sent to the GPU (push buffer CRC mismatch)",
     "application", "RESTART_APP"),
    (82, "ROBUST_CHANNEL_NVJPG0_ERROR", "JPEG engine error", "engine", "RESTART_APP"),
    (83, "ROBUST_CHANNEL_NVDEC1_ERROR", "video decoder 1 error", "engine", "RESTART_APP"),
    (84, "ROBUST_CHANNEL_NVDEC2_ERROR", "video decoder 2 error", "engine", "RESTART_APP"),
    (85, "ROBUST_CHANNEL_CE9_ERROR", "copy engine 9 error", "engine", "RESTART_APP"),
    (86, "ROBUST_CHANNEL_OFA0_ERROR", "optical flow accelerator error", "engine", "RESTART_APP"),
    (88, "ROBUST_CHANNEL_NVDEC3_ERROR", "video decoder 3 error", "engine", "RESTART_APP"),
    (89, "ROBUST_CHANNEL_NVDEC4_ERROR", "video decoder 4 error", "engine", "RESTART_APP"),
    (92, "EXCESSIVE_SBE_INTERRUPTS", "high single-bit ECC error rate", "hardware", "IGNORE"),
    (93, "INFOROM_ERASE_LIMIT_EXCEEDED", "InfoROM erase limit exceeded", "hardware", "IGNORE"),
    (94, "ROBUST_CHANNEL_CONTAINED_ERROR", "contained memory error (ECC): the affected processes must "
     "restart", "hardware", "RESTART_APP"),
    (95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "uncontained memory error (ECC): every process on the GPU "
     "is affected", "hardware", "RESET_GPU"),
    (106, "SMBPBI_TEST_MESSAGE", "out-of-band test message", "info", "IGNORE"),
    (107, "SMBPBI_TEST_MESSAGE_SILENT", "out-of-band test message (silent)", "info", "IGNORE"),
    (108, "NVLINK_REMOTE_TRANSLATION_ERROR", "NVLink remote translation error", "info", "IGNORE"),
    (109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "context switch timeout", "driver", "RESET_GPU"),
    (110, "SEC_FAULT_ERROR", "security fault", "driver", "RESET_GPU"),
    (119, "GSP_RPC_TIMEOUT", "GSP RPC timeout (the GPU's firmware processor does not answer)", "driver", "RESET_GPU"),
    (120, "GSP_ERROR", "GSP error (the GPU's firmware processor failed)", "driver", "RESET_GPU"),
    (121, "C2C_ERROR", "chip-to-chip link error", "info", "IGNORE"),
    (136, "ALI_TRAINING_FAIL", "NVLink link training failed", "hardware", "RESET_GPU"),
    (137, "NVLINK_PRIV_ERR", "NVLink privilege error", "info", "IGNORE"),
    (139, "ROBUST_CHANNEL_OFA1_ERROR", "optical flow accelerator 1 error", "engine", "RESTART_APP"),
    (140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "unrecoverable ECC error escaped containment", "hardware", "RESET_GPU"),
    (141, "ROBUST_CHANNEL_FAST_PATH_ERROR", "fast path error", "info", "IGNORE"),
    (142, "ROBUST_CHANNEL_NVENC3_ERROR", "video encoder 3 error", "engine", "CONTACT_SUPPORT"),
    (143, "GPU_INIT_ERROR", "GPU initialisation error", "driver", "RESET_GPU"),
    (144, "NVLINK_SAW_ERROR", "NVLink SAW error", "hardware", "WORKFLOW_NVLINK5_ERR"),
    (145, "NVLINK_RLW_ERROR", "NVLink RLW error", "hardware", "WORKFLOW_NVLINK5_ERR"),
    (146, "NVLINK_TLW_ERROR", "NVLink TLW error", "hardware", "WORKFLOW_NVLINK5_ERR"),
    (147, "NVLINK_TREX_ERROR", "NVLink TREX error", "info", "WORKFLOW_NVLINK5_ERR"),
    (148, "NVLINK_NVLPW_CTRL_ERROR", "NVLink NVLPW control error", "info", "WORKFLOW_NVLINK5_ERR"),
    (149, "NVLINK_NETIR_ERROR", "NVLink NETIR error", "hardware", "WORKFLOW_NVLINK5_ERR"),
    (150, "NVLINK_MSE_ERROR", "NVLink MSE error", "hardware", "WORKFLOW_NVLINK5_ERR"),
    (151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "confidential-computing key rotation error", "driver", "RESTART_VM"),
    (152, "ROBUST_CHANNEL_DLA_SMMU_ERROR", "DLA SMMU error", "info", "IGNORE"),
    (153, "ROBUST_CHANNEL_DLA_TIMEOUT", "DLA timeout", "info", "IGNORE"),
    (154, "GPU_RECOVERY_ACTION_CHANGED", "the driver says what recovery the GPU now needs (reset, drain, "
     "reboot)", "driver", "WORKFLOW_XID_154"),
    (155, "NVLINK_SW_DEFINED_ERROR", "NVLink software-defined error", "hardware", "RESET_GPU"),
    (156, "RESOURCE_RETIREMENT_EVENT", "a GPU resource was retired", "hardware", "RESET_GPU"),
    (157, "RESOURCE_RETIREMENT_FAILURE", "retiring a GPU resource failed", "hardware", "IGNORE"),
    (158, "GPU_FATAL_TIMEOUT", "fatal GPU timeout", "driver", "RESET_GPU"),
    (159, "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHI non-data error", "hardware", "WORKFLOW_CHECK_UVM"),
    (160, "CHANNEL_RETIREMENT_EVENT", "a channel was retired", "info", "IGNORE"),
    (161, "CHANNEL_RETIREMENT_FAILURE", "retiring a channel failed", "info", "IGNORE"),
    (162, "PSHC_REENGAGED", "power-smoothing capacitor re-engaged", "info", "IGNORE"),
    (163, "PSHC_DISENGAGED", "power-smoothing capacitor disengaged", "info", "IGNORE"),
    (164, "PSHC_LOW_LIFETIME", "power-smoothing capacitor near end of life", "hardware", "CONTACT_SUPPORT"),
    (165, "PSHC_ZERO_LIFETIME", "power-smoothing capacitor at end of life", "hardware", "CONTACT_SUPPORT"),
    (166, "NVLINK_SECURE_CRYPTO_ERR", "NVLink encryption error", "hardware", "CONTACT_SUPPORT"),
    (167, "PCIE_FATAL_TIMEOUT", "fatal PCIe timeout", "hardware", "RESET_GPU"),
    (168, "REDUCED_GPU_MEMORY_CAPACITY", "GPU memory capacity reduced (memory retired)", "hardware", "CONTACT_SUPPORT"),
    (169, "SEC2_HALT_ERROR", "security engine halted", "driver", "RESET_GPU"),
    (170, "NVLINK_SECURE_OTHER", "NVLink security error", "hardware", "CONTACT_SUPPORT"),
    (171, "UNCORRECTABLE_DRAM_ERROR", "uncorrectable DRAM error", "hardware", "RESET_GPU"),
    (172, "UNCORRECTABLE_SRAM_ERROR", "uncorrectable SRAM error", "hardware", "RESET_GPU"),
]
# Ranges the catalog lists as one row per family.
_FAMILIES = [((96, 98, 5), "ROBUST_CHANNEL_NVDEC%d_ERROR", "video decoder error", "engine", "RESTART_APP"),
             ((99, 105, 1), "ROBUST_CHANNEL_NVJPG%d_ERROR", "JPEG engine error", "engine", "RESTART_APP"),
             ((126, 135, 10), "ROBUST_CHANNEL_CE%d_ERROR", "copy engine error", "engine", "RESTART_APP")]
# "Unused" in the R610 catalog (no current GPU logs them); NVIDIA: contact support if one appears.
_UNUSED = [1, 2, 3, 4, 5, 6, 7, 9, 10, 12] + list(range(15, 25)) + list(range(26, 31)) + \
    [33, 34, 35, 36, 42, 47, 49, 50, 51, 52, 53, 55, 56, 57, 58, 59, 61, 65, 73, 81, 87, 90, 91] + \
    list(range(111, 119)) + [122, 123, 124, 125, 138]
_NAMED_UNUSED = {61: "internal micro-controller breakpoint"}


def _build() -> Dict[int, Xid]:
    table = {code: Xid(code, m, words, k, a) for code, m, words, k, a in _ROWS}
    for (lo, hi, first), mn, words, k, a in _FAMILIES:
        for i, code in enumerate(range(lo, hi + 1)):
            table[code] = Xid(code, mn % (first + i), words, k, a)
    for code in _UNUSED:
        table.setdefault(code, Xid(code, "UNUSED", _NAMED_UNUSED.get(code, "unused on current GPUs"),
                                   "unused", "CONTACT_SUPPORT"))
    return table


CATALOG: Dict[int, Xid] = _build()
# NVIDIA's actions that take the GPU (or the box) out of service: the alert is critical.
_OUT_OF_SERVICE = frozenset(("RESET_GPU", "RESTART_BM", "RESTART_VM", "WORKFLOW_XID_48",
                             "WORKFLOW_NVLINK_ERR", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_XID_154",
                             "WORKFLOW_CHECK_UVM"))


def lookup(code: Optional[int]) -> Optional[Xid]:
    return CATALOG.get(code) if isinstance(code, int) else None


def klass(code: Optional[int]) -> str:
    """application | hardware | driver | engine | info | unused | unknown (not in the catalog)."""
    row = lookup(code)
    return row.klass if row is not None else "unknown"


def is_application(code: Optional[int]) -> bool:
    return klass(code) == "application"


def is_hardware(code: Optional[int]) -> bool:
    """The GPU (or its driver) is at fault, not the job: a stage that dies of it is gpu_hardware."""
    row = lookup(code)
    return row is not None and (row.klass == "hardware" or
                                (row.klass == "driver" and row.action in _OUT_OF_SERVICE))


def is_critical(code: Optional[int]) -> bool:
    """NVIDIA says to reset, drain or reboot: the GPU is out of service until then."""
    row = lookup(code)
    return row is not None and row.klass in ("hardware", "driver") and row.action in _OUT_OF_SERVICE


def stage_fatal_codes() -> list:
    """The codes a log line may name to make a stage gpu_hardware (the log rule's alternation)."""
    return sorted(c for c in CATALOG if is_hardware(c))


def meaning(code: Optional[int]) -> Optional[str]:
    row = lookup(code)
    return row.meaning if row is not None else None
