"""hpnsim.report: every table and figure of hpnsim, and the HTML report; the only layer that
draws (matplotlib on the Agg backend, rich tables, plain text).

One module per subject, each owning its rich tables, its figures and its sections of the
HTML report:

- :mod:`~hpnsim.report.scenario`: a scenario run (``hpnsim run``, ``results.json``)
- :mod:`~hpnsim.report.fabric`: a fabric's switches, links and bill of materials
- :mod:`~hpnsim.report.collective`: bus bandwidth by fabric and routing, and by size
- :mod:`~hpnsim.report.iteration`: where an iteration's time goes (the breakdown chart)
- :mod:`~hpnsim.report.scaling`: weak-scaling linearity
- :mod:`~hpnsim.report.cluster`: shared-cluster runs and schedulers
- :mod:`~hpnsim.report.faults`: training through faults
- :mod:`~hpnsim.report.reliability`: reliability economics of ToR designs
- :mod:`~hpnsim.report.sweep`: a sweep's table and headline figure
- :mod:`~hpnsim.report.demo`: the demo (``hpnsim demo``, ``demo.json``)
- :mod:`~hpnsim.report.paper`: the HPN paper's collective experiments
- :mod:`~hpnsim.report.calibration`: ``hpnsim calibrate``'s fit

Shared by all: :mod:`~hpnsim.report.style` (part names and order, labels, colours, fabric
names, saving a figure), :mod:`~hpnsim.report.section` (what a report section holds),
:mod:`~hpnsim.report.html` (the page), :mod:`~hpnsim.report.inputs` (what ``hpnsim report``
reads), :mod:`~hpnsim.report.canvas` (matplotlib), and the generic drawers
:mod:`~hpnsim.report.text` (fixed-width tables), :mod:`~hpnsim.report.gantt` and
:mod:`~hpnsim.report.trace` (Chrome traces).
"""
