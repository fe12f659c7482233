"""DocEntries: shared docstring entries written into a family's docstrings."""

import re

import pytest

from hpnsim.collectives.closed_form import forms
from hpnsim.collectives.docfill import DocEntries
from hpnsim.collectives.schedules import nvls, p2p, ring, tree

BUILDERS = [ring.ring_stages, ring.hier_stages, tree.tree_stages, tree.hd_stages,
            nvls.nvls_stages, p2p.alltoall_stages, p2p.p2p_stages]


def _doc(body: str):
    def f():
        pass
    f.__doc__ = body
    return f


def test_fill_writes_entries_in_order_at_the_placeholder_indent():
    docs = DocEntries(a="a : int\n    First.", b="b : str\n    Second.")
    f = docs.fill(_doc("Sum.\n\n    Parameters\n    ----------\n    {b, a}\n    c : float\n"))
    assert f.__doc__ == ("Sum.\n\n    Parameters\n    ----------\n    b : str\n        Second.\n"
                         "    a : int\n        First.\n    c : float\n")


def test_fill_leaves_braces_that_are_not_a_whole_line():
    docs = DocEntries(a="a : int")
    text = "Maps {a} to b.\n    >>> {'a': 1}\n"
    assert docs.fill(_doc(text)).__doc__ == text


def test_unknown_entry_fails_at_decoration():
    with pytest.raises(KeyError, match="no docstring entry bogus"):
        DocEntries(a="a : int").fill(_doc("    {a, bogus}\n"))


def test_no_docstring_is_left_alone():
    f = _doc(None)
    assert DocEntries().fill(f) is f and f.__doc__ is None


STAGE_ENTRIES = ("    sch : Schedule\n        The schedule to append to",
                 "    gpus_per_host : int\n        GPUs per host of the fabric.",
                 "    channels : int\n        Independent copies",
                 "    Returns\n    -------\n    None\n        The stages are appended to ``sch``.")
FORM_ENTRIES = ("    shape : GroupShape\n        Hosts, GPUs per host and the bandwidths",
                "    size : float\n        Bytes, nccl-tests convention.",
                "    alpha_intra, alpha_inter : float\n        Seconds per step",
                "    Returns\n    -------\n    float\n        Seconds.")
FORMS = [forms.ring_time, forms.tree_time, forms.hd_time, forms.hier_time, forms.nvls_time]


@pytest.mark.parametrize("func, entries", [(b, STAGE_ENTRIES) for b in BUILDERS]
                         + [(f, FORM_ENTRIES) for f in FORMS], ids=lambda x: getattr(x, "__name__", ""))
def test_family_docstrings_hold_the_shared_entries(func, entries):
    doc = func.__doc__
    assert not re.search(r"^\s*\{[\w, ]+\}\s*$", doc, re.M)
    for entry in entries:
        assert entry in doc
