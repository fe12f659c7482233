"""The top-level API: ``import hpnsim`` is cheap, ``dir`` lists the lazy names, each resolves."""

import subprocess
import sys

import hpnsim as hs


def test_dir_lists_every_public_name_the_lazy_ones_included():
    assert dir(hs) == sorted(hs.__all__)
    for name in ("run", "Scenario", "load_scenario", "run_collective", "TrainJob",
                 "simulate_iteration", "simulate", "TaskGraph", "route", "build_fabric",
                 "fabrics", "training"):
        assert name in dir(hs)


def test_every_public_name_resolves():
    for name in hs.__all__:
        assert getattr(hs, name) is not None, name
    assert callable(hs.run) and hs.fabrics.FabricState is not None


def test_import_hpnsim_loads_no_subpackage_and_no_numpy():
    code = ("import sys, hpnsim; dir(hpnsim); "
            "print(sorted(m for m in sys.modules if m.startswith('hpnsim')), 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "['hpnsim', 'hpnsim.errors', 'hpnsim.units'] False"
