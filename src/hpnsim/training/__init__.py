"""hpnsim.training: the training program, its compiler into a TaskGraph, one accounting.

A TrainJob or an AICB workload file becomes a :class:`Program` (per pipeline stage: compute,
collective-on-a-group and send/recv ops with dependencies); :func:`compile_program` adds it
to a TaskGraph; :func:`account` splits the simulated iteration time.

>>> import hpnsim as hs
>>> from hpnsim.training import program_from_job
>>> prog = program_from_job(hs.TrainJob("llama3-8b", tp=8, dp=2, global_batch=2))
>>> len(prog.stages)
1
"""

from hpnsim.training.account import account
from hpnsim.training.compile import compile_program
from hpnsim.training.compiled import CompiledIteration
from hpnsim.training.from_aicb import program_from_aicb
from hpnsim.training.from_job import program_from_job
from hpnsim.training.iteration import IterationResult
from hpnsim.training.job import TrainJob
from hpnsim.training.program import Collective, Compute, Pass, Program, Recv, Send
from hpnsim.training.scaling import ScalingPoint, ScalingResult, scaling_linearity
from hpnsim.training.simulate import (
    build_iteration_graph,
    simulate_aicb,
    simulate_aicb_file,
    simulate_iteration,
)

__all__ = ["Collective", "CompiledIteration", "Compute", "IterationResult", "Pass", "Program",
           "Recv", "ScalingPoint", "ScalingResult", "Send", "TrainJob", "account",
           "build_iteration_graph", "compile_program", "program_from_aicb", "program_from_job",
           "scaling_linearity", "simulate_aicb", "simulate_aicb_file", "simulate_iteration"]
