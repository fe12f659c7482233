"""Unit parsing: SI inside, human strings at the edges."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpnsim.errors import InputError
from hpnsim.units import parse_bandwidth, parse_size, parse_size_range, parse_time


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("400Gbps", 50e9), ("400Gb/s", 50e9), ("200G", 25e9), ("51.2Tbps", 6.4e12),
        ("400GB/s", 400e9), ("50GBps", 50e9), ("100Mbps", 12.5e6), (1e9, 1e9),
    ],
)
def test_bandwidth(text, expected):
    assert parse_bandwidth(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4GiB", 4 * 2**30), ("4GB", 4e9), ("1M", 2**20), ("8", 8), ("1.5KiB", 1536), ("2kB", 2000)],
)
def test_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1.5ms", 1.5e-3), ("10us", 1e-5), ("3", 3.0), ("2h", 7200.0), ("100ns", 1e-7)],
)
def test_time(text, expected):
    assert math.isclose(parse_time(text), expected, rel_tol=1e-12)


@pytest.mark.parametrize("bad", ["fast", "-1G", "4GX", "", "nanGbps", "0G"])
def test_bad_bandwidth_names_the_field(bad):
    with pytest.raises(InputError) as info:
        parse_bandwidth(bad, field="port_speed")
    assert info.value.field == "port_speed"


def test_size_range_doubles_like_nccl_tests():
    sizes = parse_size_range("1M:4G")
    assert sizes[0] == 2**20 and sizes[-1] == 4 * 2**30
    assert len(sizes) == 13
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:], strict=False))


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(["K", "M", "G"]))
def test_binary_prefix_roundtrip(n, prefix):
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}[prefix]
    assert parse_size(f"{n}{prefix}iB") == n * scale
    assert parse_size(f"{n}{prefix}") == n * scale
