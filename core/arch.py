"""GPU facts every layer may read: FP32 lanes, datasheet bandwidth, the peaks a metric is held
against, theoretical occupancy. Plain functions of a device dict (what the evaluation child
reports: ``compute_capability``, ``sm_count``, ``clock_khz``, ``copy_gbs``, …)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernels.family import PointPeak

#: The prefix of the service's GPU queues (``core.queues.CeleryQueue.GPU``).
GPU_QUEUE_PREFIX = "gpu"


def gpu_queue(arch: str) -> str:
    """The service's queue of the GPUs of one architecture, e.g. ``gpu.sm_90`` (a plain name:
    embedded mode reads it without importing the Celery app)."""
    return f"{GPU_QUEUE_PREFIX}.{arch}"

#: FP32 lanes per SM by compute capability major.minor (for the FP32 FMA peak).
FP32_LANES = {"7.0": 64, "7.5": 64, "8.0": 64, "8.6": 128, "8.7": 128, "8.9": 128,
              "9.0": 128, "10.0": 128, "12.0": 128}

#: DRAM bandwidth on the datasheet, GB/s, by the device name the driver reports.
DATASHEET_GBS: dict[str, float] = {
    "NVIDIA H200": 4800.0,
    "NVIDIA H100 80GB HBM3": 3350.0,
    "NVIDIA H100 PCIe": 2000.0,
    "NVIDIA A100-SXM4-80GB": 2039.0,
    "NVIDIA A100-SXM4-40GB": 1555.0,
}


#: Dense tensor-core peaks on the datasheet, TFLOP/s, by the device name the driver reports
#: and the products' precision (no sparsity). A device not listed has no tensor-core peak.
DATASHEET_TENSOR_TFLOPS: dict[str, dict[str, float]] = {
    "NVIDIA H200": {"tf32": 494.7, "bf16": 989.4},
    "NVIDIA H100 80GB HBM3": {"tf32": 494.7, "bf16": 989.4},
    "NVIDIA H100 PCIe": {"tf32": 378.0, "bf16": 756.0},
    "NVIDIA A100-SXM4-80GB": {"tf32": 156.0, "bf16": 312.0},
    "NVIDIA A100-SXM4-40GB": {"tf32": 156.0, "bf16": 312.0},
}


def fp32_peak_tflops(device: dict[str, Any]) -> float | None:
    """FP32 FMA peak of the device from its SM count and boost clock."""
    lanes = FP32_LANES.get(str(device.get("compute_capability")))
    if not lanes or not device.get("sm_count") or not device.get("clock_khz"):
        return None
    return float(device["sm_count"] * lanes * 2 * device["clock_khz"] * 1e3 / 1e12)


def datasheet_gbs(name: str | None) -> float | None:
    """The datasheet DRAM bandwidth of the device called ``name`` (None when not in the
    table)."""
    return DATASHEET_GBS.get(name or "")


def metric_peak(peak_kind: str, device: dict[str, Any]) -> tuple[float | None, str]:
    """The peak a metric of ``peak_kind`` (``kernels.family.PEAK_KINDS``) is held against on
    ``device``, in the metric's unit, and where the figure comes from (or why there is none)."""
    if peak_kind == "fp32_ffma":
        peak = fp32_peak_tflops(device)
        if peak is None:
            return None, "FP32 FMA peak unknown: no SM count, clock or lane count for the device"
        return peak, "FP32 FMA: SMs x FP32 lanes x 2 x boost clock"
    if peak_kind == "copy_bandwidth":
        if device.get("copy_gbs"):
            return float(device["copy_gbs"]), (
                "device-to-device copy measured by the evaluation child at start-up "
                "(read + write bytes / time)")
        sheet = device.get("datasheet_gbs") or datasheet_gbs(device.get("name"))
        if sheet:
            return float(sheet), "DRAM bandwidth on the datasheet (no copy measured)"
        return None, "copy bandwidth unknown: not measured and not in the datasheet table"
    if peak_kind in ("tf32_tensor", "bf16_tensor"):
        precision = peak_kind.split("_")[0]
        peak = DATASHEET_TENSOR_TFLOPS.get(device.get("name") or "", {}).get(precision)
        if peak is None:
            return None, (f"{precision.upper()} tensor-core peak unknown: "
                          f"{device.get('name') or 'the device'} is not in the datasheet table")
        return peak, f"dense {precision.upper()} tensor-core peak on the datasheet"
    return None, f"unknown peak kind {peak_kind!r}"


def ceiling(peak: PointPeak, device: dict[str, Any]) -> tuple[float | None, str]:
    """The ceiling ``peak`` stands for on ``device``, in its metric's unit, and where the
    figure comes from (or why there is none): the device's peak over the scheme's products."""
    value, source = metric_peak(peak.kind, device)
    if value is None or peak.products == 1:
        return value, source
    return value / peak.products, (f"{peak.scheme}: {source} / {peak.products} (each fp32 "
                                   f"product takes {peak.products} of its products)")


def theoretical_occupancy(threads: int, regs: int, smem_bytes: int,
                          device: dict[str, Any]) -> tuple[float, str]:
    """Theoretical occupancy (% of the SM's warps) and the resource that limits it."""
    warps = -(-threads // 32)
    max_warps = device.get("max_threads_per_sm", 2048) // 32
    regs_per_warp = -(-max(regs, 1) * 32 // 256) * 256
    warps_by_regs = device.get("max_regs_per_sm", 65536) // regs_per_warp
    limits = {  # on a tie the first named is reported: threads before resources
        "threads": device.get("max_threads_per_sm", 2048) // threads,
        "blocks": device.get("max_blocks_per_sm", 32),
        "registers": warps_by_regs // warps,
    }
    if smem_bytes > 0:
        limits["shared_memory"] = device.get("max_smem_per_sm", 233472) // (smem_bytes + 1024)
    limiter = min(limits, key=lambda k: limits[k])
    blocks = limits[limiter]
    return round(100.0 * blocks * warps / max_warps, 1), limiter
