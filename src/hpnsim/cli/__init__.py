"""The ``hpnsim`` command line: one module per command family, registered in :mod:`.main`."""
