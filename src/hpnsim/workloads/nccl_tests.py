"""Reader for the text output of NVIDIA nccl-tests (all_reduce_perf, all_gather_perf,
reduce_scatter_perf, alltoall_perf).

What nccl-tests prints (``src/util.cu`` writeDeviceReport / writeResultHeader /
writeBenchmarkLine* / writeResultFooter)::

    # nccl-tests version 2.x ...                        (newer versions)
    # Collective test starting: all_reduce_perf          (newer versions)
    # nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 ...
    #
    # Using devices
    #  Rank  0 Group  0 Pid  1234 on    node-a device  0 [0000:18:00] NVIDIA H100 80GB HBM3
    ...
    #
    #                                                   out-of-place             in-place
    #       size   count   type  redop  root   time  algbw  busbw #wrong   time  algbw  busbw #wrong
    #        (B) (elements)                    (us) (GB/s) (GB/s)          (us) (GB/s) (GB/s)
             8       2  float    sum    -1   30.1   0.00   0.00      0   29.8   0.00   0.00      0
    ...
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 123.456
    #
    # Collective test concluded: all_reduce_perf

A row: size (bytes), count (elements), type, redop, root, then for out-of-place and in-place
time (us), algbw (GB/s), busbw (GB/s) and #wrong (``N/A`` without validation); with ``-I 1``
each side adds i_min/i_max/i_p99/i_cv%, with ``-T`` a timestamp ends the row. algbw = size /
time; busbw = algbw x 2(n-1)/n (all-reduce) or (n-1)/n (all-gather, reduce-scatter,
all-to-all), from each test's ``*GetBw``. The rank lines give the GPU count (one per rank) and
the hosts; the footer's average is the mean busbw of every out-of-place and in-place run.

Everything returned is SI: bytes, seconds, bytes/s (nccl-tests' GB is 1e9 bytes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hpnsim.collectives.ops import busbw_factor, normalize_op
from hpnsim.errors import InputError, read_user_text

#: ops whose nccl-tests count is the per-rank share (printed size = count x word x n)
_SHARDED = ("allgather", "reducescatter", "alltoall")
#: ops the tests above run
NCCL_TESTS_OPS = ("allreduce", "allgather", "reducescatter", "alltoall")
#: element sizes of nccl-tests' type names (src/common.cu test_typenames)
WORD_BYTES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
              "half": 2, "float": 4, "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1}

_RANK = re.compile(r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+"
                   r"(\d+)\s+\[[^\]]*\]\s*(.*)$")
_START = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_THREADS = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")


@dataclass(frozen=True)
class NcclTestsRow:
    """One size of a table, SI units; ``*_wrong`` is None where the log printed N/A."""

    line: int
    size: int
    count: int
    dtype: str
    redop: str
    root: int
    oop_time: float
    oop_algbw: float
    oop_busbw: float
    oop_wrong: int | None
    ip_time: float
    ip_algbw: float
    ip_busbw: float
    ip_wrong: int | None


@dataclass(frozen=True)
class NcclTestsLog:
    """A parsed nccl-tests log: the op, where it ran and one row per size.

    ``hosts`` lists the host names of the rank lines in rank order of first appearance
    (empty when the log has no rank lines); ``avg_busbw`` is the footer's figure (bytes/s),
    None for a log cut before its footer.
    """

    source: str
    op: str
    n_gpus: int
    hosts: tuple[str, ...]
    gpu_names: tuple[str, ...]
    threads: int | None
    gpus_per_thread: int | None
    rows: tuple[NcclTestsRow, ...]
    avg_busbw: float | None
    out_of_bounds: int | None

    @property
    def n_hosts(self) -> int | None:
        """Distinct hosts of the rank lines (None without rank lines)."""
        return len(self.hosts) or None

    def column(self, name: str) -> np.ndarray:
        """One column over the rows as a float array, e.g. ``"size"``, ``"oop_time"``.

        >>> log = parse_nccl_tests(example_text(), "example")
        >>> log.column("size")[:3].tolist()
        [1048576.0, 16777216.0, 1073741824.0]
        """
        if name not in NcclTestsRow.__dataclass_fields__ or name in ("dtype", "redop"):
            raise InputError("column", f"not a numeric row field: {name!r}")
        return np.array([getattr(r, name) for r in self.rows], dtype=float)


def _half_ulp(text: str) -> float:
    """Half a unit in the last printed digit of a number as printed (``12.34`` -> 0.005)."""
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** (int(exponent or 0) - decimals)


def _number(token: str, where: str, what: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise InputError(where, f"{what} must be a number, got {token!r}") from None
    if not np.isfinite(value) or value < 0:
        raise InputError(where, f"{what} must be a finite number >= 0, got {token!r}")
    return value


def _scaled(token: str, power: int) -> float:
    """``token`` x 10**power rounded once, so ``37.44`` us is the double nearest 37.44e-6 s."""
    mantissa, _, exponent = token.lower().partition("e")
    return float(f"{mantissa}e{int(exponent or 0) + power}")


def _integer(token: str, where: str, what: str, allow_na: bool = False) -> int | None:
    if allow_na and token == "N/A":
        return None
    try:
        return int(token)
    except ValueError:
        raise InputError(where, f"{what} must be an integer, got {token!r}") from None


def _op_from(source: str, program: str | None, op: str | None) -> str | None:
    for name in (op, program, Path(source).name):
        if not name:
            continue
        key = name.lower().replace("-", "_")
        for guess in ("all_reduce", "all_gather", "reduce_scatter", "alltoall"):
            if guess in key:
                return normalize_op(guess)
        if name is op:
            found = normalize_op(op)
            if found not in NCCL_TESTS_OPS:
                raise InputError("op", f"nccl-tests logs of {', '.join(NCCL_TESTS_OPS)} only, "
                                       f"got {op!r}")
            return found
    return None


def _row(tokens: list[str], where: str, per_side: int) -> tuple:
    fields = [_integer(tokens[0], where, "size"), _integer(tokens[1], where, "count"),
              tokens[2], tokens[3], _integer(tokens[4], where, "root")]
    for side in (5, 5 + per_side):
        for i, what in enumerate(("time", "algbw", "busbw")):
            _number(tokens[side + i], where, what)
        wrong = _integer(tokens[side + 3], where, "#wrong", allow_na=True)
        fields += [_scaled(tokens[side], -6), _scaled(tokens[side + 1], 9),
                   _scaled(tokens[side + 2], 9), wrong]
    return tuple(fields)


def _check_row(row: NcclTestsRow, tokens: list[str], where: str, op: str, n: int,
               per_side: int) -> None:
    """The row's own arithmetic: size vs count, busbw = algbw x factor (within print rounding)."""
    word = WORD_BYTES.get(row.dtype)
    expected = None if word is None else row.count * word * (n if op in _SHARDED else 1)
    if expected is not None and expected != row.size:
        raise InputError(where, f"size {row.size} B != count {row.count} x {word} B"
                                f"{f' x {n} ranks' if op in _SHARDED else ''} of a {op} "
                                f"{row.dtype} row; is this an {op} log on {n} GPUs?")
    factor = busbw_factor(op, n)
    for side in (5, 5 + per_side):
        algbw, busbw = float(tokens[side + 1]), float(tokens[side + 2])
        slack = _half_ulp(tokens[side + 2]) + factor * _half_ulp(tokens[side + 1]) + 1e-9
        if abs(busbw - factor * algbw) > slack:
            raise InputError(where, f"busbw {tokens[side + 2]} != algbw {tokens[side + 1]} x "
                                    f"{factor:g} ({op} on {n} GPUs)")


def parse_nccl_tests(text: str, source: str = "<text>", op: str | None = None,
                     gpus: int | None = None) -> NcclTestsLog:
    """Parse nccl-tests output; errors name ``source`` and the line.

    Parameters
    ----------
    text : the log (other lines, e.g. NCCL INFO, are skipped).
    source : the file name, used in errors and to guess the op.
    op : the collective when the log does not say (older nccl-tests do not print the
        program name): else taken from ``# Collective test starting:`` or the file name.
    gpus : the GPU count the log must show, if given.

    Examples
    --------
    >>> log = parse_nccl_tests(example_text(), "all_reduce_perf.log")
    >>> log.op, log.n_gpus, log.hosts, len(log.rows)
    ('allreduce', 4, ('node-a', 'node-b'), 3)
    >>> row = log.rows[-1]
    >>> row.size, row.oop_time, row.oop_algbw, row.oop_busbw, row.oop_wrong
    (1073741824, 0.0179514, 59810000000.0, 89720000000.0, 0)
    """
    lines = text.splitlines()
    program = threads = per_thread = avg = oob = table_line = None
    ranks: dict[int, tuple[str, str]] = {}
    per_side, width, raw = 4, 13, []
    for number, line in enumerate(lines, 1):
        where = f"{source} line {number}"
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            words = stripped.lstrip("#").split()
            if (m := _START.match(stripped)) is not None:
                program = m.group(1)
            elif (m := _THREADS.match(stripped)) is not None:
                threads, per_thread = int(m.group(1)), int(m.group(2))
            elif (m := _RANK.match(stripped)) is not None:
                rank = int(m.group(1))
                if rank in ranks:
                    raise InputError(where, f"rank {rank} listed twice; one log per file")
                ranks[rank] = (m.group(2), m.group(4).strip())
            elif words[:3] == ["size", "count", "type"]:
                if table_line is not None:
                    raise InputError(where, f"a second table (the first starts on line "
                                            f"{table_line}); give one nccl-tests run per file")
                if "algbw" not in words or "busbw" not in words:
                    raise InputError(where, "column header without algbw/busbw")
                table_line = number
                per_side = 8 if "i_min" in words else 4
                width = 5 + 2 * per_side + (2 if "timestamp" in words else 0)
            elif (m := _AVG.match(stripped)) is not None:
                _number(m.group(1), where, "Avg bus bandwidth")
                avg = _scaled(m.group(1), 9)
            elif (m := _OOB.match(stripped)) is not None:
                oob = int(m.group(1))
            continue
        tokens = stripped.split()
        if table_line is None or avg is not None or not tokens[0].isdigit():
            continue  # not a row: NCCL INFO lines, launcher output, text after the footer
        if len(tokens) != width:
            raise InputError(where, f"a row has {width} fields (size count type redop root, "
                                    f"then time algbw busbw #wrong out-of-place and in-place), "
                                    f"got {len(tokens)}")
        raw.append((number, tokens, NcclTestsRow(number, *_row(tokens, where, per_side))))
    end = f"{source} line {len(lines)}" if lines else source   # an empty file has no line
    if table_line is None:
        raise InputError(end, "no nccl-tests table (a '#  size  count  type  redop  root  "
                              "time  algbw  busbw ...' header and rows) in the file")
    if not raw:
        raise InputError(end, f"the table of line {table_line} has no rows")
    found = _op_from(source, program, op)
    if found is None:
        raise InputError(f"{source} line 1", "cannot tell the collective: the log has no "
                                             "'# Collective test starting:' line and the file "
                                             "name names none; give the op")
    if ranks:
        if sorted(ranks) != list(range(len(ranks))):
            raise InputError(f"{source} line {table_line}",
                             f"rank lines list ranks {sorted(ranks)[:8]}..., not 0..n-1")
        n = len(ranks)
    elif threads is not None:
        n = threads * per_thread  # one process: no rank lines only in hand-cut logs
    else:
        raise InputError(f"{source} line {table_line}", "no rank lines and no nThread/nGpus "
                                                        "line: the GPU count is unknown")
    if gpus is not None and gpus != n:
        raise InputError(f"{source} line {table_line}",
                         f"the log ran on {n} GPUs, expected {gpus}")
    for number, tokens, row in raw:
        _check_row(row, tokens, f"{source} line {number}", found, n, per_side)
    hosts = tuple(dict.fromkeys(ranks[r][0] for r in sorted(ranks)))
    return NcclTestsLog(source=source, op=found, n_gpus=n, hosts=hosts,
                        gpu_names=tuple(ranks[r][1] for r in sorted(ranks)), threads=threads,
                        gpus_per_thread=per_thread, rows=tuple(r for _, _, r in raw),
                        avg_busbw=avg, out_of_bounds=oob)


def check_fits(log: NcclTestsLog, fabric) -> None:
    """Raise :class:`InputError` unless the log's GPUs (and GPUs per host) fit ``fabric``
    (anything with ``n_gpus`` and ``gpus_per_host``).

    >>> from types import SimpleNamespace
    >>> log = parse_nccl_tests(example_text(), "all_reduce_perf.log")
    >>> check_fits(log, SimpleNamespace(n_gpus=8, gpus_per_host=1))
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: all_reduce_perf.log: the log ran 4 GPUs on 2 hosts; the fabric has 1 GPUs per host
    """
    if log.n_gpus > fabric.n_gpus:
        raise InputError(log.source, f"the log ran on {log.n_gpus} GPUs, the fabric has "
                                     f"{fabric.n_gpus}")
    if log.n_hosts and -(-log.n_gpus // log.n_hosts) > fabric.gpus_per_host:
        raise InputError(log.source, f"the log ran {log.n_gpus} GPUs on {log.n_hosts} hosts; "
                                     f"the fabric has {fabric.gpus_per_host} GPUs per host")


def load_nccl_tests(paths, op: str | None = None, gpus: int | None = None,
                    fabric=None) -> list[NcclTestsLog]:
    """Read and parse several nccl-tests logs (see :func:`parse_nccl_tests`); with ``fabric``
    each log must fit it (:func:`check_fits`).

    >>> load_nccl_tests(["/nonexistent/all_reduce_perf.log"])
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: /nonexistent/all_reduce_perf.log: cannot read /nonexistent/all_reduce_perf.log: No such file or directory
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    logs = []
    for path in paths:
        text = read_user_text(path, str(path), "nccl-tests log")
        log = parse_nccl_tests(text, source=str(path), op=op, gpus=gpus)
        if fabric is not None:
            check_fits(log, fabric)
        logs.append(log)
    return logs


#: a small all_reduce_perf log (4 GPUs on 2 hosts, 3 sizes) in the printed format
EXAMPLE_LOG = """\
# nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 4(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid  40000 on     node-a device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  40001 on     node-a device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  40017 on     node-b device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  40018 on     node-b device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    47.14   22.24   33.36       0    46.81   22.40   33.60       0
    16777216       4194304     float     sum      -1   311.49   53.86   80.79       0   304.32   55.13   82.69       0
  1073741824     268435456     float     sum      -1  17951.4   59.81   89.72       0  17829.4   60.22   90.33       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 68.4174
#
# Collective test concluded: all_reduce_perf
"""


def example_text() -> str:
    """The text of :data:`EXAMPLE_LOG` (for examples and doctests)."""
    return EXAMPLE_LOG
