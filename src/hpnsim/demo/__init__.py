"""hpnsim.demo: the main job, ``hpnsim demo`` (HPN 7.0 against a 3-tier Clos, the whole system).

Modules: ``pipeline`` (:class:`DemoConfig`, :func:`run_demo`, :class:`DemoResult`: the
steps in order) and ``parts`` (the larger steps: bus bandwidth by size, scaling, the
failure, the shared cluster). Names load on first use.
"""

import importlib

__all__ = ["DemoConfig", "DemoResult", "run_demo"]


def __getattr__(name: str):
    module = importlib.import_module("hpnsim.demo.pipeline")
    try:
        value = getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module 'hpnsim.demo' has no attribute {name!r}") from None
    globals()[name] = value
    return value
