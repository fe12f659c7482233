"""Input checks for the engine: every bad value raises InputError naming the task or link."""

from __future__ import annotations

import math

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


def merge_rows(row_of_entry, links, usage):
    """Sort entries by (row, link), add up duplicate links, drop zero usage."""
    order = np.lexsort((links, row_of_entry))
    rows, links, usage = row_of_entry[order], links[order], usage[order]
    if rows.size:
        first = np.ones(rows.size, dtype=bool)
        first[1:] = (rows[1:] != rows[:-1]) | (links[1:] != links[:-1])
        starts = np.flatnonzero(first)
        usage = np.add.reduceat(usage, starts)
        rows, links = rows[starts], links[starts]
    keep = usage > 0
    return rows[keep], links[keep], usage[keep]


def paths_arrays(paths):
    """(ptr, links, weight) of a Paths-like object or of a list of link-id lists."""
    if hasattr(paths, "ptr") and hasattr(paths, "links"):
        ptr = np.asarray(paths.ptr, dtype=np.int64)
        links = np.asarray(paths.links)
        weight = getattr(paths, "weight", None)
        weight = np.ones(links.size) if weight is None else np.asarray(weight, dtype=np.float64)
    else:
        rows = [np.asarray(p).ravel() for p in paths]
        ptr = np.zeros(len(rows) + 1, dtype=np.int64)
        ptr[1:] = np.cumsum([r.size for r in rows])
        links = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        weight = np.ones(links.size)
    if ptr.ndim != 1 or ptr.size < 1 or ptr[0] != 0 or np.any(np.diff(ptr) < 0) \
            or ptr[-1] != links.size or weight.shape != links.shape:
        raise InputError("paths", "need CSR arrays: ptr (n+1, from 0, non-decreasing, "
                                  "ending at len(links)) and weight as long as links")
    return ptr, links, weight


def as_link_ids(links, label):
    arr = np.asarray(links).ravel()
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.isfinite(arr)) or not np.array_equal(arr, np.round(arr)):
            raise InputError("links", f"{label}: link ids must be integers")
    arr = arr.astype(np.int64)
    if arr.size and arr.min() < 0:
        raise InputError("links", f"{label}: unknown link id {int(arr.min())} (ids are >= 0)")
    return arr


def check_values(values, field, label_of, positive=False):
    if type(values) in (float, int):  # the common scalar case, without numpy overhead
        value = float(values)
        if math.isfinite(value) and (value > 0 if positive else value >= 0):
            return np.float64(value)
    arr = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(arr) | ((arr <= 0) if positive else (arr < 0))
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        bound = "> 0" if positive else ">= 0"
        raise InputError(field, f"{label_of(i)}: must be finite and {bound}, "
                                f"got {float(arr.ravel()[i])!r}")
    return arr


def dependency_ids(deps, label) -> np.ndarray:
    """Dependency task ids as an int64 array (a single id or a sequence), validated."""
    items = [deps] if isinstance(deps, int | np.integer) else list(deps)
    for dep in items:
        if isinstance(dep, bool) or not isinstance(dep, int | np.integer) or dep < 0:
            raise InputError("deps", f"{label}: dependencies are task ids, got {dep!r}")
    return np.asarray(items, dtype=np.int64)


def priority_column(priority, n, label_of) -> np.ndarray:
    """Strict priority class per transfer as int64 (a scalar or ``n`` values), validated.

    Integers (or integral floats) only; booleans are rejected.

    >>> priority_column([0, 2.0], 2, str).tolist()
    [0, 2]
    """
    arr = np.broadcast_to(np.asarray(priority), (n,))
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
    else:
        bad = np.full(n, arr.dtype.kind not in "iu")
    if isinstance(priority, list | tuple):  # numpy turns [0, True] into integers
        bad |= np.fromiter((isinstance(p, bool | np.bool_) for p in priority), bool, n)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        got = priority[i] if isinstance(priority, list | tuple) else arr[i].item()
        raise InputError("priority", f"{label_of(i)}: must be an integer, got {got!r}")
    return arr.astype(np.int64)
