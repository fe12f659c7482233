"""NCCL's parameters and their calibration.

``params`` (:class:`NcclParams`: protocol and link efficiencies, tuning.cc latencies,
channels and queue pairs, each with its source), ``steps`` (the slot pipeline: what a ring
step carries at n ranks and what each step costs), ``measurement`` (nccl-tests sweeps and the
closed form they are fitted with), ``identifiability`` (which parameters a sweep can fix),
``calibrate`` (the fit) and ``calibration`` (calibration files).
"""
