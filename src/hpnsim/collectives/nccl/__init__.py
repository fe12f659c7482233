"""NCCL's parameters and their calibration.

``params`` (:class:`NcclParams`: protocol and link efficiencies, tuning.cc latencies,
channels and queue pairs, each with its source), ``steps`` (the slot pipeline: what a ring
step carries at n ranks and what each step costs), ``tuner`` (NCCL's own latency prediction
at v2.16.5, v2.18.3 and v2.29.7, to read a measurement against its release), ``measurement`` (nccl-tests sweeps and the
closed form they are fitted with), ``identifiability`` (which parameters a sweep can fix),
``calibrate`` (the fit) and ``calibration`` (calibration files).
"""
