"""Switch hash functions over arrays of 5-tuples (vectorized, numba-compiled).

A switch with several equal-cost next hops hashes the packet's 5-tuple (source IP,
destination IP, UDP source port, UDP destination port, IP protocol) with a configurable
function and a per-switch *seed* (the hash initial value), then takes the result modulo
the number of candidates. Real switches offer CRC16, CRC32 (upper or lower half), XOR
and similar functions; the choice matters: CRCs are affine in their initial value, so two
tiers using the same CRC with different seeds make correlated choices (polarization).

Keys are packed as 13 bytes in network order: ``sip(4) dip(4) sport(2) dport(2) proto(1)``.
Every function takes a ``uint8`` key matrix ``(n, L)`` and seeds (a scalar or one per row)
and returns ``uint32`` hashes. The scalar kernels (``*_row``) are reused inside the routing
kernels so a hop costs one hash per flow, with the seed of the switch the flow is at.

Definitions (all checked against reference implementations in the tests):

- ``crc32``: CRC-32/ISO-HDLC, equal to ``zlib.crc32(key, seed)``.
- ``crc32_lo`` / ``crc32_hi``: the lower / upper 16 bits of ``crc32``.
- ``crc16``: CRC-16/CCITT (XModem), equal to ``binascii.crc_hqx(key, seed)``.
- ``xor``: 16-bit XOR fold of the key's big-endian 16-bit words, XOR the seed.
- ``murmur``: MurmurHash3_x86_32 of the key with the seed.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hpnsim.errors import InputError

#: hash function names, in the order of their integer codes
HASH_FUNCTIONS = ("crc16", "crc32", "crc32_lo", "crc32_hi", "xor", "murmur")

#: RoCE v2 UDP destination port and UDP protocol number
ROCE_DPORT = 4791
UDP_PROTO = 17
KEY_BYTES = 13


def _crc32_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0xEDB88320), table >> 1)
    return table.astype(np.uint32)


def _crc16_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32) << 8
    for _ in range(8):
        table = np.where(table & 0x8000, (table << 1) ^ 0x1021, table << 1) & 0xFFFF
    return table.astype(np.uint32)


CRC32_TABLE = _crc32_table()
CRC16_TABLE = _crc16_table()


def hash_code(name: str, field: str = "hash") -> int:
    """Integer code of a hash function name.

    >>> hash_code("crc32_hi")
    3
    """
    if name not in HASH_FUNCTIONS:
        raise InputError(field, f"must be one of {', '.join(HASH_FUNCTIONS)}, got {name!r}")
    return HASH_FUNCTIONS.index(name)


@njit(cache=True)
def crc32_row(key, seed):
    crc = np.uint32(seed) ^ np.uint32(0xFFFFFFFF)
    for b in key:
        crc = CRC32_TABLE[(crc ^ np.uint32(b)) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


@njit(cache=True)
def crc16_row(key, seed):
    crc = np.uint32(seed) & np.uint32(0xFFFF)
    for b in key:
        index = ((crc >> np.uint32(8)) ^ np.uint32(b)) & np.uint32(0xFF)
        crc = ((crc << np.uint32(8)) & np.uint32(0xFFFF)) ^ CRC16_TABLE[index]
    return crc


@njit(cache=True)
def xor_row(key, seed):
    acc = np.uint32(seed) & np.uint32(0xFFFF)
    n = key.shape[0]
    for i in range(0, n, 2):
        word = np.uint32(key[i]) << np.uint32(8)
        if i + 1 < n:
            word |= np.uint32(key[i + 1])
        acc ^= word
    return acc


@njit(cache=True)
def _rotl32(x, r):
    return ((x << np.uint32(r)) | (x >> np.uint32(32 - r))) & np.uint32(0xFFFFFFFF)


@njit(cache=True)
def murmur_row(key, seed):
    c1 = np.uint32(0xCC9E2D51)
    c2 = np.uint32(0x1B873593)
    h = np.uint32(seed)
    n = key.shape[0]
    blocks = n // 4
    for i in range(blocks):
        k = (np.uint32(key[4 * i]) | (np.uint32(key[4 * i + 1]) << np.uint32(8))
             | (np.uint32(key[4 * i + 2]) << np.uint32(16))
             | (np.uint32(key[4 * i + 3]) << np.uint32(24)))
        k = np.uint32(k * c1)
        k = _rotl32(k, 15)
        k = np.uint32(k * c2)
        h ^= k
        h = _rotl32(h, 13)
        h = np.uint32(h * np.uint32(5) + np.uint32(0xE6546B64))
    k = np.uint32(0)
    tail = n & 3
    base = blocks * 4
    if tail == 3:
        k ^= np.uint32(key[base + 2]) << np.uint32(16)
    if tail >= 2:
        k ^= np.uint32(key[base + 1]) << np.uint32(8)
    if tail >= 1:
        k ^= np.uint32(key[base])
        k = np.uint32(k * c1)
        k = _rotl32(k, 15)
        k = np.uint32(k * c2)
        h ^= k
    h ^= np.uint32(n)
    h ^= h >> np.uint32(16)
    h = np.uint32(h * np.uint32(0x85EBCA6B))
    h ^= h >> np.uint32(13)
    h = np.uint32(h * np.uint32(0xC2B2AE35))
    h ^= h >> np.uint32(16)
    return h


@njit(cache=True)
def hash_row(code, key, seed):
    """Hash one key with the function of integer ``code`` (see HASH_FUNCTIONS)."""
    if code == 0:
        return crc16_row(key, seed)
    if code == 1:
        return crc32_row(key, seed)
    if code == 2:
        return crc32_row(key, seed) & np.uint32(0xFFFF)
    if code == 3:
        return crc32_row(key, seed) >> np.uint32(16)
    if code == 4:
        return xor_row(key, seed)
    return murmur_row(key, seed)


@njit(cache=True)
def _hash_rows(code, keys, seeds):
    out = np.empty(keys.shape[0], dtype=np.uint32)
    for i in range(keys.shape[0]):
        out[i] = hash_row(code, keys[i], seeds[i])
    return out


def five_tuple_keys(src_ip, dst_ip, sport, dport=ROCE_DPORT, proto=UDP_PROTO) -> np.ndarray:
    """Pack 5-tuples into a ``(n, 13)`` uint8 key matrix in network byte order.

    Scalars broadcast against arrays.

    >>> five_tuple_keys(0x0A000001, 0x0A000002, 49152)[0].tolist()
    [10, 0, 0, 1, 10, 0, 0, 2, 192, 0, 18, 183, 17]
    """
    sip, dip, sp, dp, pr = np.broadcast_arrays(
        np.atleast_1d(np.asarray(src_ip, dtype=np.uint64)), np.asarray(dst_ip, dtype=np.uint64),
        np.asarray(sport, dtype=np.uint64), np.asarray(dport, dtype=np.uint64),
        np.asarray(proto, dtype=np.uint64))
    n = sip.shape[0]
    keys = np.empty((n, KEY_BYTES), dtype=np.uint8)
    start = 0
    for value, width in ((sip, 4), (dip, 4), (sp, 2), (dp, 2), (pr, 1)):
        # the low ``width`` bytes, most significant first: a big-endian integer's bytes
        keys[:, start:start + width] = value.astype(f">u{width}").view(np.uint8).reshape(
            n, width)
        start += width
    return keys


def hash_keys(function: str, keys, seed=0) -> np.ndarray:
    """Hash each row of a uint8 key matrix with the named switch hash function.

    Parameters
    ----------
    function : one of ``HASH_FUNCTIONS``.
    keys : uint8 array ``(n, L)`` (e.g. from :func:`five_tuple_keys`); a 1-D array is one key.
    seed : the switch's hash initial value, a scalar or one per row.

    Returns
    -------
    uint32 array of n hashes (16-bit functions leave the upper half zero).

    Examples
    --------
    >>> import zlib
    >>> key = np.frombuffer(b"123456789", dtype=np.uint8)
    >>> hex(int(hash_keys("crc32", key)[0])), hex(zlib.crc32(b"123456789"))
    ('0xcbf43926', '0xcbf43926')
    >>> hex(int(hash_keys("crc16", key)[0]))      # CRC-16/XMODEM check value
    '0x31c3'
    """
    code = hash_code(function, "function")
    keys = np.ascontiguousarray(np.atleast_2d(np.asarray(keys, dtype=np.uint8)))
    seeds = np.broadcast_to(np.asarray(seed, dtype=np.int64) & 0xFFFFFFFF, keys.shape[:1])
    return _hash_rows(code, keys, np.ascontiguousarray(seeds, dtype=np.uint32))


def hash_five_tuples(function: str, src_ip, dst_ip, sport, dport=ROCE_DPORT,
                     proto=UDP_PROTO, seed=0) -> np.ndarray:
    """Hash 5-tuples (arrays, broadcast) with a switch hash function and seed.

    >>> h = hash_five_tuples("crc32_lo", 0x0A000001, 0x0A000002, np.arange(49152, 49156))
    >>> h.shape, bool((h < 2**16).all())
    ((4,), True)
    """
    return hash_keys(function, five_tuple_keys(src_ip, dst_ip, sport, dport, proto), seed)


def mix64(*arrays) -> np.ndarray:
    """Deterministic 64-bit mixing (splitmix64 finalizer) of integer arrays, broadcast.

    Used to derive per-switch seeds and per-connection source ports from a user seed.

    >>> a = mix64(np.arange(3), 7)
    >>> a.dtype, len(set(a.tolist()))
    (dtype('uint64'), 3)
    """
    with np.errstate(over="ignore"):
        h = np.uint64(0x9E3779B97F4A7C15)
        for value in arrays:
            x = np.asarray(value).astype(np.int64).astype(np.uint64) + h
            x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            h = x ^ (x >> np.uint64(31))
    return np.asarray(h, dtype=np.uint64)
