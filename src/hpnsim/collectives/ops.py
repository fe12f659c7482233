"""Names of collective operations, algorithms and protocols, and nccl-tests bus-bandwidth factors.

Everything a user types (``"all-reduce"``, ``"AllReduce"``, ``"hier"``) is normalized here, so
the rest of the package compares canonical names only.
"""

from __future__ import annotations

from hpnsim.errors import InputError

#: canonical operation names
OPS = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce",
       "sendrecv", "send")

#: the algorithm or protocol name that lets the cost model choose
AUTO = "auto"

#: canonical algorithm names ("direct" is the only one for all-to-all and point-to-point;
#: nvls and nvlstree need NVSwitch multicast/reduction, see :mod:`.nvls`)
COLLECTIVE_ALGORITHMS = ("ring", "tree", "hd", "hier", "nvls", "nvlstree", "direct")

#: NCCL's protocols (payload per wire byte: :data:`hpnsim.collectives.nccl.params.PROTOCOL_EFFICIENCY`)
PROTOCOLS = ("ll", "ll128", "simple")

#: which algorithms implement which operation
SUPPORTED = {
    "allreduce": ("ring", "tree", "hd", "hier", "nvls", "nvlstree"),
    "allgather": ("ring", "hd", "hier", "nvls"),
    "reducescatter": ("ring", "hd", "hier", "nvls"),
    "alltoall": ("direct",),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "sendrecv": ("direct",),
    "send": ("direct",),
}

_ALGO_ALIASES = {
    "ring": "ring", "tree": "tree", "dbtree": "tree", "doublebinarytree": "tree",
    "hd": "hd", "halvingdoubling": "hd", "rabenseifner": "hd",
    "hier": "hier", "hierarchical": "hier", "direct": "direct", AUTO: AUTO,
    "nvls": "nvls", "nvlinksharp": "nvls", "nvlstree": "nvlstree",
}


def _key(text: str) -> str:
    return str(text).strip().lower().replace("-", "").replace("_", "").replace(" ", "")


def normalize_op(op: str) -> str:
    """Canonical operation name.

    Parameters
    ----------
    op : str
        Any case, with or without dashes, underscores or spaces; ``all2all`` too.

    Returns
    -------
    str
        One of :data:`OPS`.

    Raises
    ------
    InputError
        Named ``op``, listing :data:`OPS`.

    Examples
    --------
    >>> normalize_op("All-Reduce"), normalize_op("reduce_scatter"), normalize_op("all2all")
    ('allreduce', 'reducescatter', 'alltoall')
    """
    key = _key(op).replace("all2all", "alltoall")
    if key not in OPS:
        raise InputError("op", f"must be one of {', '.join(OPS)}, got {op!r}")
    return key


def normalize_algorithm(algo: str) -> str:
    """Canonical algorithm name (``"auto"`` stays ``"auto"``).

    Parameters
    ----------
    algo : str
        A name of :data:`COLLECTIVE_ALGORITHMS`, a long form (``hierarchical``, ``halving-doubling``,
        ``double-binary-tree``, ``nvlink-sharp``) or ``auto``, in any case.

    Returns
    -------
    str
        One of :data:`COLLECTIVE_ALGORITHMS` or :data:`AUTO`.

    Raises
    ------
    InputError
        Named ``algo``, listing :data:`COLLECTIVE_ALGORITHMS`.

    Examples
    --------
    >>> normalize_algorithm("hierarchical"), normalize_algorithm("halving-doubling")
    ('hier', 'hd')
    >>> normalize_algorithm("bruck")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: algo: must be one of ring, tree, hd, hier, nvls, nvlstree, direct, auto; got 'bruck'
    """
    key = _ALGO_ALIASES.get(_key(algo))
    if key is None:
        raise InputError("algo", f"must be one of {', '.join(COLLECTIVE_ALGORITHMS)}, {AUTO}; "
                                 f"got {algo!r}")
    return key


def normalize_protocol(protocol: str) -> str:
    """Canonical protocol name: ``ll``, ``ll128``, ``simple`` or ``auto``.

    Parameters
    ----------
    protocol : str
        Any case.

    Returns
    -------
    str
        One of :data:`PROTOCOLS` or :data:`AUTO`.

    Raises
    ------
    InputError
        Named ``protocol``, listing :data:`PROTOCOLS`.

    Examples
    --------
    >>> normalize_protocol("LL128"), normalize_protocol("Simple")
    ('ll128', 'simple')
    >>> normalize_protocol("ll64")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: protocol: must be one of ll, ll128, simple, auto; got 'll64'
    """
    key = _key(protocol)
    if key != AUTO and key not in PROTOCOLS:
        raise InputError("protocol", f"must be one of {', '.join(PROTOCOLS)}, {AUTO}; "
                                     f"got {protocol!r}")
    return key


def check_supported(op: str, algo: str) -> None:
    """Raise :class:`InputError` unless ``algo`` implements ``op`` (:data:`SUPPORTED`).

    Parameters
    ----------
    op, algo : str
        Canonical names.

    Returns
    -------
    None

    Examples
    --------
    >>> check_supported("allreduce", "hier")
    >>> check_supported("alltoall", "ring")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: algo: alltoall supports direct, got 'ring'
    """
    if algo not in SUPPORTED[op]:
        raise InputError("algo", f"{op} supports {', '.join(SUPPORTED[op])}, got {algo!r}")


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests bus-bandwidth factor: ``busbw = algbw * factor``.

    All-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n; others 1.

    Parameters
    ----------
    op : str
    n : int
        Ranks (at least 1).

    Returns
    -------
    float

    Examples
    --------
    >>> busbw_factor("allreduce", 8), busbw_factor("allgather", 4), busbw_factor("broadcast", 8)
    (1.75, 0.75, 1.0)
    """
    op = normalize_op(op)
    if n < 1:
        raise InputError("gpus", f"need at least 1 GPU, got {n}")
    if op == "allreduce":
        return 2.0 * (n - 1) / n
    if op in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    return 1.0
