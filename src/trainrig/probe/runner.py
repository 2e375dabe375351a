"""Run a probe: detect, benchmark within a time limit, judge, and return one `ProbeResult`.

CPU-side sections run first, before torch is imported (their worker processes can then fork
cheaply); GPU sections run per GPU while an NVML watcher records clocks, power, heat and link state;
collectives run last in their own torchrun processes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Protocol

from trainrig.catalog import Catalog, load_catalog
from trainrig.errors import TrainrigError
from trainrig.probe import collectives as coll
from trainrig.probe import cpu_bench, storage_bench, torch_bench
from trainrig.probe.catalog_match import match_gpu
from trainrig.probe.detect import detect_gpus, detect_system
from trainrig.probe.health import Specs, evaluate
from trainrig.probe.nvml import Nvml, NvmlUnavailable
from trainrig.probe.results import (
    SECTIONS,
    Benchmarks,
    GpuInfo,
    NvmlInfo,
    ProbeResult,
    SectionStatus,
    TorchInfo,
)
from trainrig.probe.watch import NvmlWatcher

__all__ = ["ProbeOptions", "Progress", "NullProgress", "Settings", "QUICK", "FULL", "run_probe",
           "QUICK_TIME_LIMIT_S", "FULL_TIME_LIMIT_S", "nvml_backend"]

QUICK_TIME_LIMIT_S = 50.0
"""`--quick` aims to finish within 60 s including start-up; benchmarks get 50."""
FULL_TIME_LIMIT_S = 900.0
GPU_SECTIONS = ("gemm", "memory", "pcie", "p2p")


@dataclass(frozen=True)
class Settings:
    """How long and how large each benchmark runs."""

    cpu_run_s: float
    hostmem_run_s: float
    hostmem_bytes: int
    storage_bytes: int
    storage_files: int
    gemm_min_time_s: float
    gemm_repeats: int
    copy_bytes: int
    pcie_bytes: int
    p2p_bytes: int
    collectives_timeout_s: float


QUICK = Settings(cpu_run_s=0.6, hostmem_run_s=0.5, hostmem_bytes=1 << 30, storage_bytes=256 << 20,
                 storage_files=4, gemm_min_time_s=0.02, gemm_repeats=3, copy_bytes=512 << 20,
                 pcie_bytes=256 << 20, p2p_bytes=256 << 20, collectives_timeout_s=60)
FULL = Settings(cpu_run_s=2.0, hostmem_run_s=2.0, hostmem_bytes=4 << 30, storage_bytes=2 << 30,
                storage_files=8, gemm_min_time_s=0.1, gemm_repeats=5, copy_bytes=2 << 30,
                pcie_bytes=1 << 30, p2p_bytes=1 << 30, collectives_timeout_s=300)


TORCH_IMPORT_RESERVE_S = 5.0
"""Importing torch takes seconds (4 s measured on a busy 2-core VM): not started with less left."""


@dataclass(frozen=True)
class ProbeOptions:
    quick: bool = False
    only: tuple[str, ...] = ()
    """Sections to run; empty means all."""
    time_limit_s: float | None = None
    storage_path: Path | None = None
    nvml_fake: str | None = None
    """A recording name or path: replay it instead of the real NVML."""
    nproc_per_node: int | None = None
    nnodes: int = 1
    rdzv_endpoint: str | None = None
    catalog_dirs: tuple[str, ...] = ()

    @property
    def sections(self) -> tuple[str, ...]:
        return tuple(s for s in SECTIONS if s in self.only) if self.only else SECTIONS

    @property
    def limit_s(self) -> float:
        if self.time_limit_s is not None:
            return self.time_limit_s
        return QUICK_TIME_LIMIT_S if self.quick else FULL_TIME_LIMIT_S


class Progress(Protocol):
    def start(self, section: str, total: int) -> None: ...
    def advance(self, section: str, steps: int = 1) -> None: ...
    def finish(self, section: str) -> None: ...


class NullProgress:
    def start(self, section: str, total: int) -> None:
        pass

    def advance(self, section: str, steps: int = 1) -> None:
        pass

    def finish(self, section: str) -> None:
        pass


class SkipSection(Exception):
    """A section that does not apply here; the message says why."""


@dataclass
class _Run:
    options: ProbeOptions
    settings: Settings
    progress: Progress
    end_s: float
    catalog: Catalog
    result: ProbeResult
    sections: list[SectionStatus] = field(default_factory=list)
    torch: Any = None
    nvml_index: dict[int, int] = field(default_factory=dict)
    """torch device index → NVML index."""

    def remaining_s(self) -> float:
        return self.end_s - time.perf_counter()

    def out_of_time(self, reserve_s: float = 0.0) -> bool:
        return self.remaining_s() <= reserve_s

    def wants(self, section: str) -> bool:
        return section in self.options.sections


def run_probe(options: ProbeOptions, progress: Progress | None = None) -> ProbeResult:
    """Detect the machine, run the wanted benchmarks within the time limit, judge the results."""
    started = time.perf_counter()
    catalog = load_catalog(options.catalog_dirs)
    backend, source = nvml_backend(options.nvml_fake)
    nvml_info, gpus = detect_gpus(backend, source)
    result = ProbeResult(
        trainrig_version=_version(),
        measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        quick=options.quick,
        time_limit_s=options.limit_s,
        system=detect_system(),
        nvml=nvml_info,
        torch=TorchInfo(available=False, reason="not needed for the sections run"),
        gpus=[_matched(gpu, catalog) for gpu in gpus],
        benchmarks=Benchmarks(),
    )
    run = _Run(options, QUICK if options.quick else FULL, progress or NullProgress(),
               started + options.limit_s, catalog, result)
    _run_cpu_sections(run)
    _run_gpu_sections(run, backend)
    _run_collectives(run)
    return _finish(run, started)


TERMINATING_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


@contextlib.contextmanager
def ending_like_ctrl_c() -> Iterator[None]:
    """SIGTERM and SIGHUP end the probe as Ctrl-C does, by an exception, so every `finally` runs:
    the storage test's shard files (`.trainrig-probe-*`) are removed and collective workers
    stopped. The exit code is 128 + the signal's number, as if the signal had killed it. Only
    the main thread may set handlers; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        for other in TERMINATING_SIGNALS:  # a second signal must not cut the cleanup short
            signal.signal(other, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    previous = {signum: signal.signal(signum, stop) for signum in TERMINATING_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def nvml_backend(fake: str | None) -> tuple[Any | None, str]:
    """(backend, source label): a FakeNvml replaying `fake`, or None for the real pynvml."""
    if not fake:
        return None, "pynvml"
    from trainrig.probe.nvml_fake import FakeNvml

    return FakeNvml.from_recording(fake), f"fake:{Path(fake).stem}"


def _matched(gpu: GpuInfo, catalog: Catalog) -> GpuInfo:
    match = match_gpu(gpu.name, gpu.memory_total_gib, catalog.gpus)
    return gpu.model_copy(update={"catalog_id": match.catalog_id, "catalog_note": match.note})


def _version() -> str:
    try:
        return version("trainrig")
    except PackageNotFoundError:
        return "unknown"


# -- section bookkeeping ----------------------------------------------------------------------------
def _section(run: _Run, name: str, total: int, body: Callable[[], None],
             min_remaining_s: float = 1.0) -> None:
    if not run.wants(name):
        return
    if run.out_of_time(min_remaining_s):
        run.sections.append(SectionStatus(name=name, status="skipped",
                                          reason=f"time limit ({run.options.limit_s:g} s) reached"))
        return
    begin = time.perf_counter()
    run.progress.start(name, total)
    status, reason = "ran", None
    try:
        body()
    except SkipSection as skip:
        status, reason = "skipped", str(skip)
    except (OSError, RuntimeError, MemoryError, ValueError, coll.CollectivesError) as error:
        status, reason = "failed", f"{type(error).__name__}: {str(error).strip()[:400]}"
    finally:
        run.progress.finish(name)
    if status == "ran" and run.out_of_time():
        status, reason = "partial", "time limit reached during the section"
    run.sections.append(SectionStatus(name=name, status=status, reason=reason,
                                      duration_s=time.perf_counter() - begin))


def _advance(run: _Run, name: str) -> Callable[[], None]:
    return lambda: run.progress.advance(name)


# -- CPU side -------------------------------------------------------------------------------------
def _run_cpu_sections(run: _Run) -> None:
    s, bench = run.settings, run.result.benchmarks

    def cpu() -> None:
        bench.cpu = cpu_bench.cpu_loading_bench(s.cpu_run_s, advance=_advance(run, "cpu"))

    def hostmem() -> None:
        available = run.result.system.memory.available_bytes
        bench.hostmem = cpu_bench.host_memory_bench(
            s.hostmem_run_s, min(s.hostmem_bytes, available // 4), advance=_advance(run, "hostmem"))

    def storage() -> None:
        path = run.options.storage_path or Path.cwd()
        bench.storage = storage_bench.storage_bench(path, s.storage_bytes, s.storage_files,
                                                    advance=_advance(run, "storage"),
                                                    deadline_s=run.end_s)

    _section(run, "cpu", 2, cpu, min_remaining_s=4 * s.cpu_run_s + 2)
    _section(run, "hostmem", 2, hostmem, min_remaining_s=2 * s.hostmem_run_s + 1)
    _section(run, "storage", 2, storage, min_remaining_s=2)


# -- GPU side -------------------------------------------------------------------------------------
def _run_gpu_sections(run: _Run, backend: Any | None) -> None:
    wanted = [s for s in GPU_SECTIONS if run.wants(s)]
    needs_torch = wanted or (run.wants("collectives") and _collectives_apply(run))
    if not needs_torch:
        return
    if run.out_of_time(TORCH_IMPORT_RESERVE_S):  # importing torch alone would overrun the limit
        for name in wanted:
            _section(run, name, 1, _raiser("no time left"), min_remaining_s=float("inf"))
        return
    torch, reason = torch_bench.import_torch()
    run.torch = torch
    run.result.torch = torch_bench.torch_info(torch, reason)
    devices = run.result.torch.device_count
    why_not = _gpu_skip_reason(run)
    if devices and not run.result.gpus:
        run.result.gpus = _gpus_from_torch(torch, run.catalog)
    run.nvml_index = _torch_to_nvml(torch, run.result.gpus) if devices else {}
    if why_not:
        for name in wanted:
            _section(run, name, 1, _raiser(why_not), min_remaining_s=0)
        return
    watcher = _start_watcher(backend, sorted(run.nvml_index.values()))
    try:
        _gpu_benchmarks(run, watcher, devices)
    finally:
        loads = watcher.stop() if watcher else {}
    run.result.gpus = [g.model_copy(update={"under_load": loads.get(g.index)})
                       for g in run.result.gpus]


def _gpu_skip_reason(run: _Run) -> str | None:
    info = run.result.torch
    if not info.available:
        return info.reason if run.result.gpus else f"no GPU found; {info.reason}"
    if info.device_count:
        return None
    if run.result.gpus:
        return (f"NVML reports {len(run.result.gpus)} GPU(s) ({run.result.nvml.source}) but "
                "torch sees no CUDA device")
    return "no GPU found"


def _raiser(reason: str) -> Callable[[], None]:
    def body() -> None:
        raise SkipSection(reason)

    return body


def _start_watcher(backend: Any | None, indices: list[int]) -> NvmlWatcher | None:
    if not indices:
        return None
    try:
        return NvmlWatcher(Nvml.open(backend), indices).start()
    except NvmlUnavailable:
        return None


def _gpu_benchmarks(run: _Run, watcher: NvmlWatcher | None, devices: int) -> None:
    torch, s, bench = run.torch, run.settings, run.result.benchmarks
    shapes_first = torch_bench.gemm_shapes(run.options.quick)
    shapes_rest = torch_bench.gemm_shapes(True)
    peaks = {g.index: _peaks(run, g) for g in run.result.gpus}
    steps = len(torch_bench.PRECISIONS) * (len(shapes_first) + (devices - 1) * len(shapes_rest))

    def gemm() -> None:
        for device in range(devices):
            first = device == 0
            precisions = torch_bench.PRECISIONS if first or not run.options.quick else ("bf16",)
            nvml = run.nvml_index.get(device, device)
            result = torch_bench.gemm_bench(
                torch, torch.device(f"cuda:{device}"), precisions,
                shapes_first if first else shapes_rest, min_time_s=s.gemm_min_time_s,
                repeats=s.gemm_repeats, peaks=peaks.get(nvml), advance=_advance(run, "gemm"),
                should_stop=lambda: run.out_of_time(_reserve_after_gemm(run)))
            bench.gemm.append(result.model_copy(update={"gpu_index": nvml}))

    def memory() -> None:
        for device in range(devices):
            copy = torch_bench.device_copy_bench(torch, torch.device(f"cuda:{device}"),
                                                 s.copy_bytes, s.gemm_min_time_s, s.gemm_repeats)
            bench.memory.append(copy.model_copy(update={"gpu_index": run.nvml_index.get(device)}))
            run.progress.advance("memory")

    def pcie() -> None:
        for device in range(devices):
            nvml = run.nvml_index.get(device, device)
            read_link = (lambda i=nvml: watcher.link(i)) if watcher else None
            result = torch_bench.pcie_bench(torch, device, s.pcie_bytes, s.gemm_min_time_s,
                                            s.gemm_repeats, read_link=read_link)
            bench.pcie.append(result.model_copy(update={"gpu_index": nvml}))
            run.progress.advance("pcie")

    def p2p() -> None:
        if devices < 2:
            raise SkipSection("needs two or more GPUs")
        pairs = [(i, j) for i in range(devices) for j in range(devices) if i != j]
        if run.options.quick:
            pairs = [(0, j) for j in range(1, devices)]
        bench.p2p = torch_bench.p2p_bench(torch, pairs, s.p2p_bytes, s.gemm_min_time_s,
                                          s.gemm_repeats, should_stop=run.out_of_time,
                                          advance=_advance(run, "p2p"))

    _section(run, "gemm", steps, gemm, min_remaining_s=3)
    _section(run, "memory", devices, memory)
    _section(run, "pcie", devices, pcie)
    _section(run, "p2p", max(1, devices * (devices - 1)), p2p)


def _reserve_after_gemm(run: _Run) -> float:
    """Seconds the GEMM sweep leaves for the sections after it (rough per-GPU costs)."""
    quick = run.options.quick
    gpus = max(1, run.result.torch.device_count)
    per_gpu = (0.5 if quick else 3.0) * sum(run.wants(s) for s in ("memory", "pcie"))
    pairs = (gpus - 1) if quick else gpus * (gpus - 1)
    reserve = per_gpu * gpus + (0.5 * pairs if run.wants("p2p") else 0.0)
    if run.wants("collectives") and _collectives_apply(run):
        reserve += 12.0 if quick else 40.0
    return reserve


def _peaks(run: _Run, gpu: GpuInfo) -> dict[str, float | None]:
    if not gpu.catalog_id:
        return {}
    spec = run.catalog.gpus.get(gpu.catalog_id).entry
    return {p: spec.peak(p) for p in torch_bench.PRECISIONS}  # type: ignore[arg-type]


def _gpus_from_torch(torch: Any, catalog: Catalog) -> list[GpuInfo]:
    """GPUs described by torch alone, when NVML is unavailable."""
    gpus = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        gpu = GpuInfo(index=index, name=props.name, memory_total_gib=props.total_memory / 2**30,
                      cuda_capability=f"{props.major}.{props.minor}",
                      unavailable={"nvml": "NVML unavailable: GPU described by torch"})
        gpus.append(_matched(gpu, catalog))
    return gpus


def _torch_to_nvml(torch: Any, gpus: list[GpuInfo]) -> dict[int, int]:
    """Map torch's device order (CUDA_VISIBLE_DEVICES, fastest first) to NVML's by PCI bus id."""
    by_bus = {_bus_key(g.pci_bus_id): g.index for g in gpus if g.pci_bus_id}
    mapping = {}
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        key = None
        if hasattr(props, "pci_bus_id") and hasattr(props, "pci_device_id"):
            key = (int(getattr(props, "pci_domain_id", 0)), int(props.pci_bus_id),
                   int(props.pci_device_id))
        mapping[index] = by_bus.get(key, index)
    return mapping


def _bus_key(bus_id: str) -> tuple[int, int, int] | None:
    try:
        domain, bus, rest = bus_id.split(":")
        return int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)
    except ValueError:
        return None


# -- collectives ------------------------------------------------------------------------------------
def _collectives_apply(run: _Run) -> bool:
    return bool(run.options.only) or run.options.nnodes > 1 or len(run.result.gpus) > 1


def _run_collectives(run: _Run) -> None:
    if not run.wants("collectives"):
        return

    def body() -> None:
        if not _collectives_apply(run):
            raise SkipSection("needs two or more GPUs; `--only collectives` runs it on the CPU "
                              "with gloo")
        if run.torch is None:
            raise SkipSection(run.result.torch.reason or "torch is not installed")
        on_gpu = run.result.torch.device_count > 0
        nproc = run.options.nproc_per_node or (run.result.torch.device_count if on_gpu else 2)
        timeout = max(10.0, min(run.remaining_s(), run.settings.collectives_timeout_s))
        run.result.benchmarks.collectives = coll.run_collectives(
            nproc, coll.collective_sizes(run.options.quick, on_gpu),
            backend="nccl" if on_gpu else "gloo", nnodes=run.options.nnodes,
            rdzv_endpoint=run.options.rdzv_endpoint, timeout_s=timeout)
        run.progress.advance("collectives")

    _section(run, "collectives", 1, body, min_remaining_s=8)


# -- finishing ----------------------------------------------------------------------------------------
def _finish(run: _Run, started: float) -> ProbeResult:
    result = run.result
    result.sections = run.sections
    result.gpu_found = bool(result.gpus)
    result.notes = _notes(result, run)
    result.checks = evaluate(result, _specs(run))
    result.duration_s = time.perf_counter() - started
    return result


def _specs(run: _Run) -> Specs:
    gpus = {g.index: run.catalog.gpus.get(g.catalog_id).entry for g in run.result.gpus
            if g.catalog_id}
    return Specs(gpus=gpus, link=_lookup(run.catalog.links), storage=_lookup(run.catalog.storage))


def _lookup(section: Any) -> Callable[[str], Any]:
    def get(name: str) -> Any:
        try:
            return section.get(name).entry
        except TrainrigError:
            return None

    return get


def _notes(result: ProbeResult, run: _Run) -> list[str]:
    notes = []
    if not result.gpus:
        notes.append(f"No GPU found ({_nvml_reason(result.nvml)}): GPU benchmarks skipped; CPU, "
                     "memory, storage and detection ran.")
    if result.nvml.source.startswith("fake:"):
        notes.append(f"GPU facts replayed from the NVML recording {result.nvml.source[5:]!r}, "
                     "not read from this machine.")
    if run.torch is None and any(run.wants(s) for s in GPU_SECTIONS) and result.gpus:
        notes.append(result.torch.reason or "torch unavailable")
    usable = result.system.cpu.usable_cpus
    if usable and os.cpu_count() and usable < (os.cpu_count() or 0):
        notes.append(f"This process may use {usable} of {os.cpu_count()} CPUs (affinity).")
    return notes


def _nvml_reason(nvml: NvmlInfo) -> str:
    return nvml.reason or "NVML found no device"
