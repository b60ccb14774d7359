"""``anyffi.Device`` and ``anyffi.device(kind, id)``: a DLPack device, passed by value (``DLDevice``)."""

from __future__ import annotations

import operator
from typing import Union

# DLDeviceType (dlpack.h)
DEVICE_TYPES = {
    "cpu": 1,
    "cuda": 2,
    "cuda_host": 3,
    "opencl": 4,
    "vulkan": 7,
    "metal": 8,
    "vpi": 9,
    "rocm": 10,
    "rocm_host": 11,
    "ext_dev": 12,
    "cuda_managed": 13,
    "oneapi": 14,
    "webgpu": 15,
    "hexagon": 16,
    "maia": 17,
    "trn": 18,
}
DEVICE_NAMES = {v: k for k, v in DEVICE_TYPES.items()}
_ALIASES = {"gpu": 2, "nvidia": 2, "llvm": 1, "c": 1, "rocm_gpu": 10}


class Device:
    """A device: ``device_type`` (a DLDeviceType number) and ``device_id``. Immutable and hashable."""

    __slots__ = ("device_type", "device_id", "_packed")

    def __init__(self, device_type: "int | str", device_id: "int | None" = None):
        if isinstance(device_type, str):  # Device("cuda", 1), Device("cuda:1"), as device()
            d = device(device_type, device_id)
            device_type, device_id = d.device_type, d.device_id
        try:  # ints only: device("cuda", 1.5) is not silently cuda:1
            device_type, device_id = operator.index(device_type), operator.index(0 if device_id is None else device_id)
        except TypeError:
            raise TypeError(f"anyffi.Device: device type and index must be ints, got ({device_type!r}, {device_id!r})") from None
        if not 0 <= device_type < 2**31:
            raise ValueError(f"anyffi.Device: device type must be 0 to 2**31 - 1, got {device_type}")
        if not 0 <= device_id < 2**31:
            raise ValueError(f"anyffi.Device: device index must be 0 to 2**31 - 1, got {device_id}")
        object.__setattr__(self, "device_type", device_type)
        object.__setattr__(self, "device_id", device_id)
        # DLDevice {int32 device_type; int32 device_id} as one little-endian 8-byte value.
        object.__setattr__(self, "_packed", device_type | (device_id << 32))

    def __setattr__(self, name, value):
        raise AttributeError("anyffi.Device is immutable")

    @classmethod
    def _from_packed(cls, v: int) -> "Device":
        return _device_from_packed(v)

    @property
    def type_name(self) -> str:
        return DEVICE_NAMES.get(self.device_type, f"device{self.device_type}")

    @property
    def type(self) -> str:
        """The device type's name (``"cpu"``, ``"cuda"``), as ``type_name``."""
        return self.type_name

    @property
    def index(self) -> int:
        """The device index, as ``device_id``."""
        return self.device_id

    def dlpack_device_type(self) -> int:
        """The DLDeviceType number, as ``device_type``."""
        return self.device_type

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.device_type, self.device_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and other._packed == self._packed

    def __hash__(self) -> int:
        return hash(self._packed)

    def __repr__(self) -> str:
        return f"device('{self.type_name}', {self.device_id})"

    def __str__(self) -> str:
        return f"{self.type_name}:{self.device_id}"

    def __reduce__(self):
        return (Device, (self.device_type, self.device_id))


_BY_PACKED: dict[int, Device] = {}


def _device_from_packed(v: int) -> Device:
    d = _BY_PACKED.get(v)
    if d is None:
        d = Device(v & 0xFFFFFFFF, v >> 32)
        if len(_BY_PACKED) < 4096:
            _BY_PACKED[v] = d
    return d


def device(kind: Union[str, int, Device], index: int | None = None) -> Device:
    """A device from a name (``"cpu"``, ``"cuda"``, ``"cuda:1"``), a DLDeviceType number or a Device."""
    if isinstance(kind, Device):
        return kind if index is None else Device(kind.device_type, index)
    if isinstance(kind, str):
        name = kind.strip().lower()
        if ":" in name:
            name, _, idx = name.partition(":")
            if index is not None:
                raise ValueError(f"anyffi.device: {kind!r} names an index and index={index} was given too")
            try:
                index = int(idx)
            except ValueError:
                raise ValueError(f"anyffi.device: bad device index in {kind!r}") from None
        dt = DEVICE_TYPES.get(name, _ALIASES.get(name))
        if dt is None:
            raise ValueError(f"anyffi.device: unknown device kind {kind!r}; known: {', '.join(DEVICE_TYPES)}")
        return Device(dt, 0 if index is None else index)
    if isinstance(kind, int) and not isinstance(kind, bool):
        return Device(kind, 0 if index is None else index)
    raise TypeError(f"anyffi.device: expected a device name, a device type number or a Device, got {type(kind).__name__}")


cpu = Device(1, 0)
