"""The NVML collector: real GPU readings through nvidia-ml-py, and the fallback when there are none.

This is the only module that touches the NVIDIA driver. It owns initialisation, per-device
reads (utilisation, memory, power, and SM activity/occupancy through GPM where the GPU has it)
and the fallback. It must never raise to its caller: a missing library, a missing driver or a
device that stops answering turns into fewer samples (or the fallback collector's samples), and
the reason is logged once, not at every interval.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from typing import Any

from gpuaas.telemetry.collectors import GpuCollector
from gpuaas.telemetry.samples import GpuSample

log = logging.getLogger(__name__)


def _load_nvml() -> tuple[Any, str | None]:
    """The pynvml module, initialised, or ``(None, reason)``."""
    try:
        import pynvml
    except ImportError as exc:
        return None, f"nvidia-ml-py is not installed ({exc})"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return None, f"NVML init failed: {exc}"
    except OSError as exc:  # a broken libnvidia-ml.so
        return None, f"NVML could not be loaded: {exc}"
    return pynvml, None


class _Device:
    """One GPU's handle and the GPM sample pair that SM metrics are computed from."""

    def __init__(self, nvml: Any, index: int) -> None:
        self.index = index
        self.handle = nvml.nvmlDeviceGetHandleByIndex(index)
        uuid = nvml.nvmlDeviceGetUUID(self.handle)
        name = nvml.nvmlDeviceGetName(self.handle)
        self.uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        self.model = name.decode() if isinstance(name, bytes) else str(name)
        self.gpm_previous: Any = None
        self.gpm_current: Any = None
        self.gpm = False
        try:
            support = nvml.nvmlGpmQueryDeviceSupport(self.handle)
            if support.isSupportedDevice:
                self.gpm_previous = nvml.nvmlGpmSampleAlloc()
                self.gpm_current = nvml.nvmlGpmSampleAlloc()
                nvml.nvmlGpmSampleGet(self.handle, self.gpm_previous)
                self.gpm = True
        except (nvml.NVMLError, AttributeError):
            self.gpm = False


class NvmlCollector:
    """Reads every GPU of this node at each ``sample(now)``.

    Without NVML it delegates to ``fallback`` (for example a ``SimulatedCollector``) or returns
    no samples; either way the reason is logged once, at WARNING, the first time it is known.
    """

    def __init__(
        self,
        *,
        fallback: GpuCollector | None = None,
        fallback_name: str = "no GPU samples",
        hostname: str | None = None,
    ) -> None:
        self.fallback = fallback
        self.fallback_name = fallback_name
        self.hostname = hostname if hostname is not None else socket.gethostname()
        self._nvml: Any = None
        self._devices: list[_Device] = []
        self._tried = False
        self.unavailable_reason: str | None = None
        self._device_errors_logged: set[int] = set()

    # -- lifecycle -----------------------------------------------------------------------------
    def available(self) -> bool:
        self._start()
        return self._nvml is not None

    def _start(self) -> None:
        if self._tried:
            return
        self._tried = True
        nvml, reason = _load_nvml()
        if nvml is not None:
            try:
                count = int(nvml.nvmlDeviceGetCount())
                self._devices = [_Device(nvml, i) for i in range(count)]
                if count == 0:
                    reason = "NVML reports no GPU"
            except nvml.NVMLError as exc:
                reason = f"NVML could not list GPUs: {exc}"
            if reason is not None:
                self._shutdown(nvml)
                nvml = None
        self._nvml = nvml
        self.unavailable_reason = reason
        if reason is not None:
            log.warning("GPU telemetry: %s; falling back to %s", reason, self.fallback_name)
        else:
            log.info("GPU telemetry: NVML sees %d GPU(s)", len(self._devices))

    def close(self) -> None:
        if self._nvml is not None:
            for device in self._devices:
                for gpm in (device.gpm_previous, device.gpm_current):
                    if gpm is not None:
                        with contextlib.suppress(self._nvml.NVMLError):
                            self._nvml.nvmlGpmSampleFree(gpm)
            self._shutdown(self._nvml)
        self._nvml = None
        self._devices = []

    @staticmethod
    def _shutdown(nvml: Any) -> None:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()

    # -- sampling ------------------------------------------------------------------------------
    def sample(self, now: float) -> list[GpuSample]:
        self._start()
        if self._nvml is None:
            return self.fallback.sample(now) if self.fallback is not None else []
        out: list[GpuSample] = []
        for device in self._devices:
            try:
                out.append(self._read(device, now))
            except self._nvml.NVMLError as exc:
                if device.index not in self._device_errors_logged:
                    self._device_errors_logged.add(device.index)
                    log.warning(
                        "GPU telemetry: GPU %d (%s) unreadable: %s", device.index, device.uuid, exc
                    )
        return out

    def _read(self, device: _Device, now: float) -> GpuSample:
        nvml = self._nvml
        rates = nvml.nvmlDeviceGetUtilizationRates(device.handle)
        memory = nvml.nvmlDeviceGetMemoryInfo(device.handle)
        sm_active, sm_occupancy = self._gpm(device)
        return GpuSample(
            time=now,
            index=device.index,
            uuid=device.uuid,
            model=device.model,
            utilization_percent=float(rates.gpu),
            memory_used_bytes=int(memory.used),
            memory_total_bytes=int(memory.total),
            power_watts=self._power(device),
            sm_active=sm_active,
            sm_occupancy=sm_occupancy,
            memory_copy_util_percent=float(rates.memory),
            hostname=self.hostname,
        )

    def _power(self, device: _Device) -> float | None:
        """Instantaneous power (field value) where the driver has it, else the 1 s average."""
        nvml = self._nvml
        try:
            values = nvml.nvmlDeviceGetFieldValues(device.handle, [nvml.NVML_FI_DEV_POWER_INSTANT])
            if values[0].nvmlReturn == nvml.NVML_SUCCESS:
                return _field_value(nvml, values[0]) / 1000.0
        except (nvml.NVMLError, AttributeError):
            pass
        try:
            return float(nvml.nvmlDeviceGetPowerUsage(device.handle)) / 1000.0
        except nvml.NVMLError:
            return None

    def _gpm(self, device: _Device) -> tuple[float | None, float | None]:
        """SM activity and occupancy (0..1) between the previous sample and now, via GPM.

        GPM is a difference of two device snapshots, so the first reading after start has
        nothing to compare with and yields ``None``.
        """
        nvml = self._nvml
        if not device.gpm:
            return None, None
        try:
            nvml.nvmlGpmSampleGet(device.handle, device.gpm_current)
        except nvml.NVMLError:
            return None, None
        # From here on the newest snapshot is the base of the next difference.
        previous, current = device.gpm_previous, device.gpm_current
        device.gpm_previous, device.gpm_current = current, previous
        try:
            query = nvml.c_nvmlGpmMetricsGet_t()
            query.version = nvml.NVML_GPM_METRICS_GET_VERSION
            query.numMetrics = 2
            query.sample1 = previous
            query.sample2 = current
            query.metrics[0].metricId = nvml.NVML_GPM_METRIC_SM_UTIL
            query.metrics[1].metricId = nvml.NVML_GPM_METRIC_SM_OCCUPANCY
            nvml.nvmlGpmMetricsGet(query)
        except (nvml.NVMLError, AttributeError):
            return None, None
        values: list[float | None] = []
        for i in range(2):
            metric = query.metrics[i]
            ok = metric.nvmlReturn == nvml.NVML_SUCCESS
            values.append(max(0.0, min(1.0, float(metric.value) / 100.0)) if ok else None)
        return values[0], values[1]


def _field_value(nvml: Any, value: Any) -> float:
    kind = int(value.valueType)
    union = value.value
    by_type = {
        nvml.NVML_VALUE_TYPE_DOUBLE: "dVal",
        nvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
        nvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
        nvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
        nvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
        nvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
        nvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
    }
    return float(getattr(union, by_type.get(kind, "uiVal")))
