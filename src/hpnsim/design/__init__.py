"""The design space: from a chip, NICs, a scale-up domain, oversubscription and a power budget
to the family's fabrics, their scale, counts, power and cost, the mechanism ladder (the HPN
paper's Table 2), and the template parameters that build each (docs/design-space.md).

>>> from hpnsim.design import design_inputs, design_space
>>> best = [x for x in design_space(design_inputs()) if x.name == "2tier-dualtor-rail-dualplane"]
>>> best[0].gpus, best[0].bill["switches"]
(15360, {'tor': 240, 'agg': 120})
"""

from hpnsim.design.domains import DOMAINS, ScaleUpDomain, domain_named
from hpnsim.design.emit import command_line, scenario_block, template_options
from hpnsim.design.family import Mechanisms, family
from hpnsim.design.inputs import DesignInputs, design_inputs
from hpnsim.design.ladder import Step, ladder
from hpnsim.design.radix import Binding, Shape, shape
from hpnsim.design.space import Design, design_space, evaluate

__all__ = [
    "DOMAINS", "Binding", "Design", "DesignInputs", "Mechanisms", "ScaleUpDomain", "Shape",
    "Step", "command_line", "design_inputs", "design_space", "domain_named", "evaluate",
    "family", "ladder", "scenario_block", "shape", "template_options",
]
