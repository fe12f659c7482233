"""A software prefetch of one state row: the loop asks for the next event's rows early.

At hundreds of GPUs the kernel's state (links, packets, flows) is far larger than the caches
and consecutive events touch unrelated rows, so each event waits on several misses. The next
event is known as soon as the current one is popped (the heap's top), so its rows can be on
their way while the current event runs. A prefetch changes no value: it only moves memory.

>>> import numpy as np
>>> from numba import njit
>>> @njit
... def touch(a, i):
...     prefetch_row(a, i)
...     return a[i, 0]
>>> float(touch(np.ones((4, 2)), 3))
1.0
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch_row(typingctx, arr, row):
    """Ask the CPU to bring row ``row`` of the 2-D array ``arr`` into the cache (LLVM's
    ``llvm.prefetch``: a read, high locality); no bounds check, no effect on values."""
    if not isinstance(arr, types.Array) or arr.ndim != 2 or not isinstance(row, types.Integer):
        return None
    sig = types.void(arr, row)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        index = context.cast(builder, args[1], signature.args[1], types.intp)
        zero = context.get_constant(types.intp, 0)
        ptr = cgutils.get_item_pointer2(context, builder, data=ary.data,
                                        shape=cgutils.unpack_tuple(builder, ary.shape),
                                        strides=cgutils.unpack_tuple(builder, ary.strides),
                                        layout=aryty.layout, inds=[index, zero],
                                        boundscheck=False)
        byte_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32])
        # declare_intrinsic mangles the name for this llvmlite's pointer type (p0i8 or p0)
        fn = builder.module.declare_intrinsic("llvm.prefetch", [byte_ptr], fnty)
        builder.call(fn, [builder.bitcast(ptr, byte_ptr), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen
