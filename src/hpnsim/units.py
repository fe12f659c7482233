"""Units at the edges: parse human strings into SI (bytes, seconds, bytes/s) and format back.

Inside hpnsim every quantity is SI: sizes in bytes, times in seconds, bandwidths in
bytes per second. Strings are parsed only where users type them (CLI, YAML, keyword
defaults of builders).

Conventions
-----------
- Bandwidth: a lower-case ``b`` or ``bps`` or a bare prefix means *bits*
  (``"400Gbps"``, ``"400Gb/s"``, ``"200G"`` are network line rates); an upper-case ``B``
  means *bytes* (``"400GB/s"``, ``"50GBps"``). Prefixes are decimal (k, M, G, T).
- Size: ``"4GB"`` is decimal (4e9), ``"4GiB"`` is binary; a bare prefix (``"4G"``,
  ``"1M"``) is binary, as in nccl-tests' ``-b``/``-e`` arguments.
- Time: ``ns``, ``us`` (or ``µs``), ``ms``, ``s``, ``min``, ``h``, ``d``.
- A plain number (int or float, or a numeric string) is taken as already SI.
"""

from __future__ import annotations

import math
import re

from hpnsim.errors import InputError

_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50, "E": 2**60}
_TIME = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0,
    "min": 60.0, "h": 3600.0, "d": 86400.0,
}

#: the longest simulated time (a point in a run or a duration) hpnsim accepts: 2**52 x 10 ns,
#: about 521 days. A float64 clock past it cannot tell apart two instants 10 ns apart (a
#: hundredth of a microsecond-scale hop latency), so short transfers round away: an arrival of
#: 1e15 s, where the clock's step is 0.125 s, gave iteration times of 0.
MAX_TIME_S = 2.0**52 * 1e-8

_BW_RE = re.compile(rf"^{_NUMBER}\s*([kKMGTP]?)(bps|b/s|Bps|B/s|b|B)?$")
_SIZE_RE = re.compile(rf"^{_NUMBER}\s*([kKMGTPE]?)(i?B)?$")
_TIME_RE = re.compile(rf"^{_NUMBER}\s*(ns|us|µs|ms|sec|s|min|h|d)?$")


def _as_number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    return None


def _check(field: str, value: float, allow_zero: bool, typed=None) -> float:
    """``value`` (SI) must be finite and positive; the error echoes ``typed``, what the user
    wrote (``'-400G'``), rather than its SI conversion."""
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise InputError(field, f"must be finite and {bound}, got "
                                f"{value if typed is None else typed!r}")
    return value


def parse_bandwidth(value, field: str = "bandwidth") -> float:
    """Parse a bandwidth into bytes per second.

    Examples
    --------
    >>> parse_bandwidth("400Gbps")
    50000000000.0
    >>> parse_bandwidth("200G")          # network line rate: bits
    25000000000.0
    >>> parse_bandwidth("400GB/s")       # upper-case B: bytes
    400000000000.0
    >>> parse_bandwidth(1e9)             # numbers are already bytes/s
    1000000000.0
    """
    number = _as_number(value)
    if number is None:
        text = str(value).strip()
        match = _BW_RE.match(text)
        if not match:
            raise InputError(
                field, f"cannot parse bandwidth {value!r}; use e.g. '400Gbps', '200G', '50GB/s'"
            )
        magnitude, prefix, unit = match.groups()
        unit = unit or "b"
        number = float(magnitude) * _DECIMAL[prefix]
        if unit.startswith("b"):
            number /= 8.0
    return _check(field, number, False, value)


def parse_size(value, field: str = "size", allow_zero: bool = False) -> float:
    """Parse a data size into bytes.

    Examples
    --------
    >>> parse_size("4GiB")
    4294967296.0
    >>> parse_size("4GB")
    4000000000.0
    >>> parse_size("1M")                 # bare prefix is binary, as in nccl-tests
    1048576.0
    """
    number = _as_number(value)
    if number is None:
        text = str(value).strip()
        match = _SIZE_RE.match(text)
        if not match:
            raise InputError(field, f"cannot parse size {value!r}; use e.g. '4GiB', '4GB', '1M'")
        magnitude, prefix, unit = match.groups()
        prefix = prefix.upper() if prefix == "k" else prefix
        scale = _DECIMAL[prefix] if unit == "B" else _BINARY[prefix]
        number = float(magnitude) * scale
    return _check(field, number, allow_zero, value)


def parse_time(value, field: str = "time", allow_zero: bool = True) -> float:
    """Parse a duration into seconds.

    Examples
    --------
    >>> parse_time("1.5ms")
    0.0015
    >>> parse_time("2h")
    7200.0
    """
    number = _as_number(value)
    if number is None:
        text = str(value).strip()
        match = _TIME_RE.match(text)
        if not match:
            raise InputError(field, f"cannot parse time {value!r}; use e.g. '1.5ms', '10us', '2h'")
        magnitude, unit = match.groups()
        number = float(magnitude) * _TIME[unit or "s"]
    return _check(field, number, allow_zero, value)


def check_time_range(seconds: float, field: str = "time", typed=None) -> float:
    """``seconds`` if it is no longer than :data:`MAX_TIME_S`, else an :class:`InputError`.

    >>> check_time_range(86400.0)
    86400.0
    >>> check_time_range(1e15, "jobs[0].arrival", "1e15s")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: jobs[0].arrival: must be at most 4.5e+07 s (about 521 days: past it the simulated clock cannot resolve 10 ns), got '1e15s'
    """
    if seconds > MAX_TIME_S:
        raise InputError(field, f"must be at most {MAX_TIME_S:.2g} s (about "
                                f"{MAX_TIME_S / 86400:.0f} days: past it the simulated clock "
                                f"cannot resolve 10 ns), got {seconds if typed is None else typed!r}")
    return seconds


def parse_size_range(value: str, field: str = "sizes") -> list[float]:
    """Parse an nccl-tests style size sweep ``"1M:4G"`` (factor 2) or ``"1M:4G:4"`` (factor 4).

    A single size gives a one-element list; a comma list gives those sizes.

    Examples
    --------
    >>> parse_size_range("1M:8M")
    [1048576.0, 2097152.0, 4194304.0, 8388608.0]
    >>> parse_size_range("1K,1M")
    [1024.0, 1048576.0]
    """
    text = str(value).strip()
    if "," in text:
        return [parse_size(part, field) for part in text.split(",")]
    parts = text.split(":")
    if len(parts) == 1:
        return [parse_size(parts[0], field)]
    if len(parts) not in (2, 3):
        raise InputError(field, f"use 'MIN:MAX[:FACTOR]' or a comma list, got {value!r}")
    low, high = parse_size(parts[0], field), parse_size(parts[1], field)
    factor = float(parts[2]) if len(parts) == 3 else 2.0
    if high < low:
        raise InputError(field, f"MAX must be >= MIN, got {value!r}")
    if factor <= 1:
        raise InputError(field, f"FACTOR must be > 1, got {parts[2]!r}")
    sizes = []
    size = low
    while size <= high * (1 + 1e-12):
        sizes.append(size)
        size *= factor
    return sizes


_RANGE_RE = re.compile(r"^(\d+)(?:\s*-\s*(\d+))?$")


def parse_index_ranges(value, field: str = "gpus") -> list[int]:
    """Indices from a comma list of indices and inclusive ranges (``"0-127,1024-1151"``),
    in the order written; a list may mix integers and such strings. Repeats, descending
    ranges and negative numbers are input errors naming ``field``.

    Examples
    --------
    >>> parse_index_ranges("0-3,8,10-11")
    [0, 1, 2, 3, 8, 10, 11]
    >>> parse_index_ranges([16, "0-1"])
    [16, 0, 1]
    >>> parse_index_ranges("4-2")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: gpus: a range ends at or after its start, got '4-2'
    """
    parts = value if isinstance(value, list | tuple) else [value]
    out: list[int] = []
    for part in parts:
        if isinstance(part, bool):
            raise InputError(field, f"must be GPU indices or ranges such as 0-127, got {part!r}")
        if isinstance(part, int):
            if part < 0:
                raise InputError(field, f"GPU indices are 0 or more, got {part}")
            out.append(part)
            continue
        for item in str(part).split(","):
            match = _RANGE_RE.match(item.strip())
            if not match:
                raise InputError(field, f"use indices and ranges such as 0-127,1024-1151, "
                                        f"got {item.strip()!r}")
            low, high = int(match[1]), int(match[2] if match[2] is not None else match[1])
            if high < low:
                raise InputError(field, f"a range ends at or after its start, got "
                                        f"{item.strip()!r}")
            out.extend(range(low, high + 1))
    if not out:
        raise InputError(field, f"lists no GPU, got {value!r}")
    seen: set[int] = set()
    for g in out:
        if g in seen:
            raise InputError(field, f"GPU {g} appears twice, got {value!r}")
        seen.add(g)
    return out


def format_bytes(value: float) -> str:
    """Human-readable binary size.

    >>> format_bytes(4 * 2**30)
    '4.00 GiB'
    """
    for unit, scale in (("EiB", 2**60), ("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30),
                        ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value:.0f} B"


def format_time(seconds: float) -> str:
    """Human-readable duration.

    >>> format_time(0.0015)
    '1.500 ms'
    """
    for unit, scale in (("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3f} {unit}"
    return f"{seconds * 1e9:.1f} ns"


def format_bandwidth(bytes_per_second: float) -> str:
    """Human-readable line rate in bits per second.

    >>> format_bandwidth(50e9)
    '400.0 Gbps'
    """
    bits = bytes_per_second * 8
    for unit, scale in (("Tbps", 1e12), ("Gbps", 1e9), ("Mbps", 1e6), ("kbps", 1e3)):
        if abs(bits) >= scale:
            return f"{bits / scale:.1f} {unit}"
    return f"{bits:.0f} bps"
