"""`--prometheus PORT`: the latest samples as Prometheus metrics, GPU metrics named as dcgm-exporter
names them, so dashboards built for it (Grafana dashboard 12239) read trainrig's too.

GPU metrics keep DCGM's field names, units and labels (gpu, UUID, pci_bus_id, device, modelName,
Hostname): NVIDIA/dcgm-exporter etc/default-counters.csv and etc/dcp-metrics-included.csv —
DCGM_FI_DEV_FB_USED in MiB, DCGM_FI_DEV_POWER_USAGE in W, DCGM_FI_PROF_* activity as ratios 0–1,
DCGM_FI_PROF_PCIE_{TX,RX}_BYTES as bytes per second. Host and step metrics, which DCGM lacks, are
`trainrig_*` in base units (Prometheus naming conventions). A metric that is N/A is left out of the
scrape, never exported as -1 or 0. Pull-based: a scrape reads the latest snapshot, so exporting
costs the sampler nothing between scrapes. Needs the `prometheus-client` package (imported lazily).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from trainrig.errors import TrainrigError

__all__ = ["PrometheusExporter", "Snapshot", "GPU_METRICS", "HOST_METRICS", "STEP_METRICS"]

_MIB = 2**20
GPU_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname")
LOOPBACK = "127.0.0.1"
"""Metrics are served to this host only unless a caller widens it on purpose."""


def _scale(factor: float) -> Callable[[dict[str, Any], str], float | None]:
    def convert(row: dict[str, Any], column: str) -> float | None:
        value = row.get(column)
        return None if value is None else value * factor
    return convert


def _free_mib(row: dict[str, Any], column: str) -> float | None:
    used, total = row.get("memory_used_bytes"), row.get("memory_total_bytes")
    return None if used is None or total is None else (total - used) / _MIB


# (metric, column, help, conversion)
GPU_METRICS: tuple[tuple[str, str, str, Callable[[dict[str, Any], str], float | None]], ...] = (
    ("DCGM_FI_DEV_GPU_UTIL", "utilization_gpu_pct", "GPU utilization (in %).", _scale(1)),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "utilization_memory_pct", "Memory utilization (in %).", _scale(1)),
    ("DCGM_FI_DEV_FB_USED", "memory_used_bytes", "Framebuffer memory used (in MiB).",
     _scale(1 / _MIB)),
    ("DCGM_FI_DEV_FB_FREE", "memory_total_bytes", "Framebuffer memory free (in MiB).", _free_mib),
    ("DCGM_FI_DEV_POWER_USAGE", "power_w", "Power draw (in W).", _scale(1)),
    ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "power_limit_w", "Enforced power limit (in W).", _scale(1)),
    ("DCGM_FI_DEV_SM_CLOCK", "sm_clock_mhz", "SM clock frequency (in MHz).", _scale(1)),
    ("DCGM_FI_DEV_MEM_CLOCK", "mem_clock_mhz", "Memory clock frequency (in MHz).", _scale(1)),
    ("DCGM_FI_DEV_GPU_TEMP", "temperature_c", "GPU temperature (in C).", _scale(1)),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "clock_event_mask",
     "Current clock throttle reasons (bitmask of nvmlClocksEventReason).", _scale(1)),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "pcie_tx_kbs",
     "The rate of data transmitted over the PCIe bus, in bytes per second.", _scale(1e3)),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "pcie_rx_kbs",
     "The rate of data received over the PCIe bus, in bytes per second.", _scale(1e3)),
    ("DCGM_FI_PROF_SM_ACTIVE", "sm_active_pct",
     "The ratio of cycles an SM has at least 1 warp assigned.", _scale(0.01)),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_active_pct",
     "Ratio of cycles the tensor (HMMA) pipe is active.", _scale(0.01)),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "dram_active_pct",
     "Ratio of cycles the device memory interface is active sending or receiving data.",
     _scale(0.01)),
    ("trainrig_gpu_nvlink_tx_bytes_per_second", "nvlink_tx_gbs", "NVLink data sent.", _scale(1e9)),
    ("trainrig_gpu_nvlink_rx_bytes_per_second", "nvlink_rx_gbs", "NVLink data received.",
     _scale(1e9)),
)

HOST_METRICS: tuple[tuple[str, str, str, float], ...] = (
    ("trainrig_host_cpu_utilization_ratio", "cpu_pct", "All cores busy, average.", 0.01),
    ("trainrig_host_cpu_iowait_ratio", "iowait_pct", "CPU time waiting on I/O.", 0.01),
    ("trainrig_host_memory_used_bytes", "ram_used_bytes", "Host RAM in use.", 1),
    ("trainrig_host_memory_available_bytes", "ram_available_bytes", "Host RAM available.", 1),
    ("trainrig_host_swap_used_bytes", "swap_used_bytes", "Swap in use.", 1),
    ("trainrig_host_disk_read_bytes_per_second", "disk_read_bps", "Disk reads.", 1),
    ("trainrig_host_disk_write_bytes_per_second", "disk_write_bps", "Disk writes.", 1),
    ("trainrig_host_network_receive_bytes_per_second", "net_rx_bps", "Network received.", 1),
    ("trainrig_host_network_transmit_bytes_per_second", "net_tx_bps", "Network sent.", 1),
    ("trainrig_job_cpu_cores", "job_cpu_pct", "CPU cores the job's processes use.", 0.01),
    ("trainrig_job_memory_rss_bytes", "job_rss_bytes", "RSS of the job's processes, summed.", 1),
    ("trainrig_job_loader_workers", "workers", "Loader worker processes.", 1),
)

STEP_METRICS: tuple[tuple[str, str, str], ...] = (
    ("trainrig_step_seconds", "step_s", "Duration of the last training step."),
    ("trainrig_step_data_wait_seconds", "data_wait_s", "Wait for data in the last step."),
    ("trainrig_step_count", "steps", "Training steps recorded."),
    ("trainrig_tokens_per_second", "tokens_per_s", "Tokens per second over the recent steps."),
    ("trainrig_mfu_ratio", "mfu", "Model FLOPs utilization over the recent steps."),
)


@dataclass
class Snapshot:
    """What a scrape shows: the latest GPU rows and host row, GPU identities, recent steps."""

    gpu_rows: list[dict[str, Any]] = field(default_factory=list)
    host_row: dict[str, Any] | None = None
    gpus: dict[int, dict[str, Any]] = field(default_factory=dict)
    steps: dict[str, float | None] = field(default_factory=dict)


class PrometheusExporter:
    """Serves `/metrics` on `port` (0: any free port; `.port` says which) from `snapshot()`."""

    def __init__(self, snapshot: Callable[[], Snapshot], port: int,
                 addr: str = LOOPBACK) -> None:
        self.snapshot, self.port, self.addr = snapshot, port, addr
        self.hostname = socket.gethostname()
        self._server: Any = None

    @classmethod
    def for_sampler(cls, sampler: Any, steps: Any, port: int,
                    live_steps: Callable[[], dict[str, float | None]] | None = None,
                    addr: str = LOOPBACK) -> PrometheusExporter:
        """An exporter over a running `Sampler` (and the process's `StepRecorder`, if any)."""
        from trainrig.monitor.live import recent_step_figures

        gpus = {g.index: g.to_dict() for g in (sampler.gpu.infos if sampler.gpu else [])}

        def snapshot() -> Snapshot:
            figures = live_steps() if live_steps else recent_step_figures(
                list(steps.recent) if steps is not None else [], steps.count if steps else 0, {})
            return Snapshot(list(sampler.latest_gpu), sampler.latest_host, gpus, figures)

        return cls(snapshot, port, addr)

    def start(self) -> PrometheusExporter:
        try:
            from prometheus_client import CollectorRegistry, start_http_server
        except ImportError:
            raise TrainrigError("--prometheus", "needs the prometheus-client package: "
                                                "pip install prometheus-client.") from None
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self))
        try:
            self._server, _ = start_http_server(self.port, addr=self.addr, registry=registry)
        except OSError as error:
            raise TrainrigError("--prometheus", f"cannot listen on {self.addr} port {self.port} "
                                                f"({error.strerror or error}).") from None
        self.port = self._server.server_address[1]
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _Collector:
    def __init__(self, exporter: PrometheusExporter) -> None:
        self.exporter = exporter

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        snap = self.exporter.snapshot()
        for name, column, text, convert in GPU_METRICS:
            family = GaugeMetricFamily(name, text, labels=GPU_LABELS)
            for row in snap.gpu_rows:
                value = convert(row, column)
                if value is not None:
                    family.add_metric(self._labels(row["gpu"], snap), float(value))
            yield family
        yield from self._host(snap, GaugeMetricFamily)
        yield from self._steps(snap, GaugeMetricFamily)

    def _labels(self, index: int, snap: Snapshot) -> list[str]:
        info = snap.gpus.get(index, {})
        return [str(index), info.get("uuid") or "", info.get("pci_bus_id") or "",
                f"nvidia{index}", info.get("name") or "", self.exporter.hostname]

    def _host(self, snap: Snapshot, family_type: Any) -> Iterator[Any]:
        for name, column, text, factor in HOST_METRICS:
            family = family_type(name, text, labels=["Hostname"])
            value = (snap.host_row or {}).get(column)
            if value is not None:
                family.add_metric([self.exporter.hostname], float(value) * factor)
            yield family

    def _steps(self, snap: Snapshot, family_type: Any) -> Iterator[Any]:
        for name, key, text in STEP_METRICS:
            family = family_type(name, text, labels=["Hostname"])
            value = snap.steps.get(key)
            if value is not None:
                family.add_metric([self.exporter.hostname], float(value))
            yield family
