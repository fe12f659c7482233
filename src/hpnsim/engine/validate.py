"""Input checks for the engine: every bad value raises InputError naming the task or link."""

from __future__ import annotations

import numpy as np

from hpnsim.errors import InputError


def check_capacity(capacity) -> np.ndarray:
    """Capacities as float64, finite and >= 0, else an InputError naming the first bad link.

    >>> check_capacity([1.0, 2]).tolist()
    [1.0, 2.0]
    """
    try:
        cap = np.ascontiguousarray(capacity, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError("capacity", f"must be an array of numbers, got {capacity!r}") from exc
    if cap.ndim != 1:
        raise InputError("capacity", f"must be one-dimensional, got shape {cap.shape}")
    bad = np.flatnonzero(~np.isfinite(cap) | (cap < 0))
    if bad.size:
        link = int(bad[0])
        raise InputError("capacity",
                         f"link {link}: must be finite and >= 0, got {float(cap[link])!r}")
    return cap


def check_usage_matrix(usage, n_links: int):
    """CSR arrays (ptr int64, links int64, usage float64) of a variables x links matrix.

    Zero entries are dropped; entries must be finite and >= 0.

    >>> import scipy.sparse as sp
    >>> ptr, links, coef = check_usage_matrix(sp.csr_matrix([[0.0, 2.0]]), 2)
    >>> ptr.tolist(), links.tolist(), coef.tolist()
    ([0, 1], [1], [2.0])
    """
    import scipy.sparse as sp

    if not sp.issparse(usage):
        raise InputError("usage", f"must be a scipy.sparse matrix, got {type(usage).__name__}")
    if usage.shape[1] != n_links:
        raise InputError(
            "usage", f"has {usage.shape[1]} columns but capacity has {n_links} links"
        )
    csr = sp.csr_matrix(usage, dtype=np.float64, copy=True)
    csr.sum_duplicates()
    bad = ~np.isfinite(csr.data) | (csr.data < 0)
    if bad.any():
        row = int(np.searchsorted(csr.indptr, np.flatnonzero(bad)[0], side="right") - 1)
        raise InputError("usage", f"variable {row}: entries must be finite and >= 0")
    csr.eliminate_zeros()
    return (csr.indptr.astype(np.int64), csr.indices.astype(np.int64),
            np.ascontiguousarray(csr.data))


def check_variable_array(values, n: int, field: str, dtype, default, positive=False):
    """A per-variable array (scalar broadcast, ``None`` -> default), finite (and > 0).

    >>> check_variable_array(None, 2, "weight", float, 1.0).tolist()
    [1.0, 1.0]
    """
    if values is None:
        return np.full(n, default, dtype=dtype)
    arr = np.asarray(values)
    if arr.ndim == 0:
        arr = np.full(n, arr.item())
    if arr.shape != (n,):
        raise InputError(field, f"needs one value per variable ({n}), got shape {arr.shape}")
    if np.issubdtype(np.dtype(dtype), np.integer):
        if arr.size and not np.all(np.isfinite(arr.astype(np.float64))):
            raise InputError(field, "must be integers")
        out = arr.astype(dtype)
        if arr.size and not np.array_equal(out, arr):
            raise InputError(field, "must be integers")
        return out
    out = arr.astype(np.float64)
    bad = ~np.isfinite(out) | ((out <= 0) if positive else (out < 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        bound = "> 0" if positive else ">= 0"
        raise InputError(field, f"variable {i}: must be finite and {bound}, got {float(out[i])!r}")
    return out


def check_length(values, n: int, field: str, per: str = "path") -> None:
    """InputError unless ``values`` is ``None``, a scalar, or exactly ``n`` values.

    >>> check_length([1.0, 2.0], 2, "sizes")
    >>> check_length([1.0, 2.0, 3.0], 2, "sizes")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: sizes: needs one value per path (2), got 3
    """
    if values is None:
        return
    try:
        shape = np.shape(values)
    except ValueError as exc:  # a ragged nested sequence
        raise InputError(field, f"needs one value per {per} ({n}), got a ragged sequence"
                         ) from exc
    if shape not in ((), (n,)):
        got = shape[0] if len(shape) == 1 else f"shape {shape}"
        raise InputError(field, f"needs one value per {per} ({n}), got {got}")


def find_cycle(n_tasks: int, dep_ptr: np.ndarray, deps: np.ndarray) -> list[int] | None:
    """One dependency cycle (task ids, in order) or None if the graph is acyclic.

    ``deps[dep_ptr[t]:dep_ptr[t+1]]`` are the tasks ``t`` waits for.

    >>> find_cycle(3, np.array([0, 1, 2, 3]), np.array([2, 0, 1]))
    [0, 2, 1]
    >>> find_cycle(2, np.array([0, 0, 1]), np.array([0])) is None
    True
    """
    state = np.zeros(n_tasks, dtype=np.int8)  # 0 new, 1 on stack, 2 done
    for root in range(n_tasks):
        if state[root]:
            continue
        stack = [(root, int(dep_ptr[root]))]
        state[root] = 1
        while stack:
            task, pos = stack[-1]
            if pos == dep_ptr[task + 1]:
                state[task] = 2
                stack.pop()
                continue
            stack[-1] = (task, pos + 1)
            nxt = int(deps[pos])
            if state[nxt] == 1:
                path = [t for t, _ in stack]
                return path[path.index(nxt):]
            if state[nxt] == 0:
                state[nxt] = 1
                stack.append((nxt, int(dep_ptr[nxt])))
    return None
