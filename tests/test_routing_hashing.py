"""Switch hash functions against reference implementations, and ECMP against balls-into-bins."""

from __future__ import annotations

import binascii
import itertools
import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpnsim.errors import InputError
from hpnsim.routing import ballsbins
from hpnsim.routing.hashing import (
    HASH_FUNCTIONS,
    five_tuple_keys,
    hash_five_tuples,
    hash_keys,
)

u32 = st.integers(0, 2**32 - 1)
u16 = st.integers(0, 2**16 - 1)


@settings(max_examples=60, deadline=None)
@given(u32, u32, u16, u16, st.integers(0, 255), u32)
def test_crc_matches_zlib_and_binascii(sip, dip, sport, dport, proto, seed):
    packed = struct.pack("!IIHHB", sip, dip, sport, dport, proto)
    keys = five_tuple_keys(sip, dip, sport, dport, proto)
    assert keys[0].tobytes() == packed
    crc = zlib.crc32(packed, seed)
    assert hash_keys("crc32", keys, seed)[0] == crc
    assert hash_keys("crc32_lo", keys, seed)[0] == crc & 0xFFFF
    assert hash_keys("crc32_hi", keys, seed)[0] == crc >> 16
    assert hash_keys("crc16", keys, seed)[0] == binascii.crc_hqx(packed, seed & 0xFFFF)
    words = struct.unpack("!6H", packed[:12]) + (packed[12] << 8,)
    folded = seed & 0xFFFF
    for word in words:
        folded ^= word
    assert hash_keys("xor", keys, seed)[0] == folded


def test_crc32_on_a_few_tuples_vectorized():
    rng = np.random.default_rng(3)
    sip, dip = rng.integers(0, 2**32, 50), rng.integers(0, 2**32, 50)
    sport = rng.integers(0, 2**16, 50)
    got = hash_five_tuples("crc32", sip, dip, sport, seed=0xABCD)
    want = [zlib.crc32(struct.pack("!IIHHB", a, b, c, 4791, 17), 0xABCD)
            for a, b, c in zip(sip.tolist(), dip.tolist(), sport.tolist(), strict=True)]
    assert got.tolist() == want


@pytest.mark.parametrize(("data", "seed", "expected"), [
    (b"", 0, 0), (b"", 1, 0x514E28B7), (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\0\0\0\0", 0, 0x2362F9DE), (b"Hello, world!", 1234, 0xFAF6CDB3),
    (b"The quick brown fox jumps over the lazy dog", 0x9747B28C, 0x2FA826CD),
])
def test_murmur3_published_vectors(data, seed, expected):
    keys = np.frombuffer(data, dtype=np.uint8).reshape(1, -1)
    assert hash_keys("murmur", keys, seed)[0] == expected


def test_per_row_seeds_and_unknown_function():
    keys = five_tuple_keys(1, 2, np.arange(4))
    seeds = np.array([0, 1, 2, 3])
    per_row = hash_keys("murmur", keys, seeds)
    one_by_one = [hash_keys("murmur", keys[i], int(seeds[i]))[0] for i in range(4)]
    assert per_row.tolist() == one_by_one
    with pytest.raises(InputError, match="function"):
        hash_keys("md5", keys)


def test_crc_seed_only_xors_a_constant():
    # the root of polarization: for fixed-length keys, CRC(seed) = CRC(0) ^ c(seed)
    keys = five_tuple_keys(np.arange(100), 7, 49152)
    delta = hash_keys("crc32", keys, 0) ^ hash_keys("crc32", keys, 0x5EED)
    assert len(set(delta.tolist())) == 1
    delta_murmur = hash_keys("murmur", keys, 0) ^ hash_keys("murmur", keys, 0x5EED)
    assert len(set(delta_murmur.tolist())) == 100


# --- exact balls-into-bins law -------------------------------------------------------

@pytest.mark.parametrize(("m", "n"), [(3, 3), (4, 4), (5, 3), (3, 6)])
def test_ballsbins_exact_against_brute_force(m, n):
    loads = [np.bincount(a, minlength=n) for a in itertools.product(range(n), repeat=m)]
    max_loads = np.array([load.max() for load in loads])
    ideal = -(-m // n)
    excess = np.array([np.maximum(load - ideal, 0).sum() for load in loads])
    distinct = np.array([(load > 0).sum() for load in loads])
    assert ballsbins.expected_max_load(m, n) == pytest.approx(max_loads.mean(), rel=1e-12)
    assert ballsbins.no_collision_probability(m, n) == pytest.approx(
        (max_loads <= 1).mean(), abs=1e-12)
    assert ballsbins.expected_excess_flows(m, n) == pytest.approx(excess.mean(), rel=1e-12)
    assert ballsbins.expected_distinct_paths(m, n) == pytest.approx(distinct.mean(), rel=1e-12)
    dist = ballsbins.max_load_distribution(m, n)
    assert dist.sum() == pytest.approx(1.0)


def test_no_collision_closed_form():
    assert ballsbins.no_collision_probability(8, 8) == pytest.approx(40320 / 8**8)
    assert ballsbins.no_collision_probability(9, 8) == 0.0


# --- real switch hashes behave like ideal random hashing -----------------------------

def _random_flows(rng, trials, n):
    sip = rng.integers(0x0A000000, 0x0A010000, (trials, n))
    dip = rng.integers(0x0A000000, 0x0A010000, (trials, n))
    sport = rng.integers(49152, 65536, (trials, n))
    return sip.ravel(), dip.ravel(), sport.ravel()


@pytest.mark.parametrize("function", HASH_FUNCTIONS)
@pytest.mark.parametrize("n", [4, 6])
def test_hash_onto_n_paths_matches_balls_into_bins(function, n):
    trials = 20000
    rng = np.random.default_rng(n)
    sip, dip, sport = _random_flows(rng, trials, n)
    bins = (hash_five_tuples(function, sip, dip, sport, seed=0x1234) % n).reshape(trials, n)
    counts = np.stack([(bins == b).sum(axis=1) for b in range(n)], axis=1)
    max_load = counts.max(axis=1)

    p = ballsbins.no_collision_probability(n, n)                  # n!/n^n
    observed = (max_load == 1).mean()
    assert abs(observed - p) < 4.5 * np.sqrt(p * (1 - p) / trials)

    dist = ballsbins.max_load_distribution(n, n)
    k = np.arange(n + 1)
    mean, std = np.dot(k, dist), np.sqrt(np.dot(k**2, dist) - np.dot(k, dist) ** 2)
    assert abs(max_load.mean() - mean) < 4.5 * std / np.sqrt(trials)


def test_sixty_flows_on_sixty_uplinks_max_load():
    trials, n = 3000, 60
    rng = np.random.default_rng(60)
    sip, dip, sport = _random_flows(rng, trials, n)
    bins = (hash_five_tuples("crc32", sip, dip, sport, seed=99) % n).reshape(trials, n)
    max_load = np.array([np.bincount(row, minlength=n).max() for row in bins])
    distinct = np.array([len(np.unique(row)) for row in bins])
    dist = ballsbins.max_load_distribution(n, n)
    k = np.arange(n + 1)
    mean, std = np.dot(k, dist), np.sqrt(np.dot(k**2, dist) - np.dot(k, dist) ** 2)
    assert mean == pytest.approx(3.9178, abs=1e-4)
    assert abs(max_load.mean() - mean) < 4.5 * std / np.sqrt(trials)
    # about 38 of 60 uplinks used: 60 (1 - (59/60)^60) = 37.93
    assert abs(distinct.mean() - ballsbins.expected_distinct_paths(n, n)) < 0.15


def test_numba_source_port_matches_numpy_mix():
    from hpnsim.routing.hashing import mix64
    from hpnsim.routing.precise import source_port

    for seed, relay, dst, conn in [(0, 0, 1, 0), (-5, 17, 15359, 255), (2**40, 3, 9, 7)]:
        want = 49152 + int(mix64(seed, relay, dst, conn) % np.uint64(16384))
        assert source_port(seed, relay, dst, conn) == want
