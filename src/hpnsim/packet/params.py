"""The packet engine's parameters: one frozen dataclass, every default with its source.

Three presets name where a whole set comes from: ``connectx`` (the default: NVIDIA
ConnectX/BlueField firmware DCQCN defaults, SimAI's shipped switch settings for 400G ports),
``dcqcn_paper`` (Zhu et al., SIGCOMM'15, the parameters the CoNEXT'16 fluid model analyses)
and ``simai`` (aliyun/SimAI's ns-3 backend as shipped). Sources: /work/shared/reference/
congestion.md and docs/packet.md.

>>> p = PacketParams()
>>> p.kmin_bytes, p.g
(800000.0, 0.0048828125)
>>> preset("dcqcn_paper").cnp_interval_s
5e-05
>>> params_dict(p.replace(cc=False))["cc"]
{'value': False, 'source': 'set by the user'}
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpnsim.errors import InputError

__all__ = ["PacketParams", "preset", "load_params", "params_dict", "PRESETS"]


def _f(value, source: str):
    return field(default=value, metadata={"source": source})


_CX = "NVIDIA ConnectX firmware default (mlxconfig / DOCA DCQCN CC parameters)"
_SIMAI400 = "SimAI ns-3 backend as shipped, 400G ports (aliyun/SimAI SimAI.conf)"


@dataclass(frozen=True)
class PacketParams:
    """Parameters of NICs (DCQCN), switches (shared buffer, ECN, PFC) and packets.

    Rates are bytes/s, sizes bytes, times seconds. ``metadata['source']`` of each field says
    where its default comes from; :func:`params_dict` prints them.
    """

    # --- packets ---------------------------------------------------------------------
    mtu_bytes: int = _f(4096, "largest RoCE path MTU, 4096 B (InfiniBand spec vol. 1 §7.7; "
                               "ConnectX active_mtu on jumbo-frame Ethernet)")
    header_bytes: int = _f(62, "RoCEv2 framing: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + "
                                "ICRC 4 + FCS 4 (IBTA Annex A17)")
    control_bytes: int = _f(64, "minimum Ethernet frame, 64 B (IEEE 802.3): CNP size")
    data_priority: int = _f(3, "RoCE lossless traffic class 3 (NVIDIA RoCE configuration "
                                "default)")
    # --- DCQCN reaction point (sender NIC) --------------------------------------------
    cc: bool = _f(True, "on: DCQCN is the RoCE congestion control of ConnectX NICs")
    g: float = _f(5 / 1024, f"{_CX}: DCE_TCP_G 1019, g = (1024 - 1019)/1024")
    alpha_interval_s: float = _f(1e-6, f"{_CX}: alpha update timer 1 us")
    rate_decrease_interval_s: float = _f(4e-6, f"{_CX}: rate-reduce monitor period 4 us")
    rp_timer_s: float = _f(300e-6, f"{_CX}: rate increase timer 300 us")
    byte_counter_bytes: float = _f(32767.0, f"{_CX}: byte reset 32,767 B")
    fast_recovery_steps: int = _f(5, "DCQCN paper F = 5 (Zhu et al. SIGCOMM'15)")
    rate_ai_bytes_s: float = _f(5e6 / 8, f"{_CX}: AI 5 Mb/s")
    rate_hai_bytes_s: float = _f(50e6 / 8, f"{_CX}: HAI 50 Mb/s")
    min_rate_bytes_s: float = _f(1e6 / 8, f"{_CX}: minimum rate 1 Mb/s")
    clamp_target_rate: bool = _f(False, f"{_CX}: clamp_tgt_rate 0 with "
                                        "clamp_tgt_rate_after_time_inc 1: a cut sets Rt = Rc only "
                                        "after a timer increase (ns-3 'mlx' DCQCN, SimAI)")
    # --- DCQCN notification point (receiver NIC) ---------------------------------------
    cnp_interval_s: float = _f(4e-6, f"{_CX}: minimum time between CNPs 4 us")
    # --- switch: ECN (RED on egress occupancy) -----------------------------------------
    ecn: bool = _f(True, "on: DCQCN needs ECN marking at switches")
    kmin_bytes: float = _f(800e3, f"{_SIMAI400}: Kmin 800 KB")
    kmax_bytes: float = _f(3200e3, f"{_SIMAI400}: Kmax 3,200 KB")
    pmax: float = _f(0.2, f"{_SIMAI400}: Pmax 0.2")
    # --- switch: shared buffer and PFC ---------------------------------------------------
    buffer_bytes: float = _f(32 * 2**20, "SimAI: 32 MB shared buffer per switch (51.2T chips "
                                         "have 100-160 MB by secondary sources: sweep it)")
    pfc: bool = _f(True, "on: RoCE fabrics run lossless (HPN, SimAI)")
    pfc_alpha: float = _f(1 / 8, "SimAI/ns-3-alibabacloud: XOFF at free shared buffer >> 3")
    pfc_xoff_bytes: float = _f(0.0, "0: dynamic threshold (SimAI); htsim's RoCE example uses a "
                                     "static 15 x 9 KB")
    pfc_resume_bytes: float = _f(3 * 1024, "SimAI/ns-3-alibabacloud: XON at threshold - 3 KB")
    headroom_bdp: float = _f(3.0, "SimAI: 3 x BDP headroom per ingress port (BDP: link rate "
                                   "x round-trip propagation, plus 2 packets in service)")
    egress_alpha: float = _f(1.0, "Choudhury & Hahne, dynamic thresholds, IEEE/ACM ToN 1998 "
                                  "(alpha = 1); only lossy traffic is admitted this way")
    # --- run control ---------------------------------------------------------------------
    seed: int = _f(0, "any: seeds ECN marking; a seed gives one deterministic run")

    def replace(self, **changes) -> PacketParams:
        """A copy with some fields changed (unknown names: InputError)."""
        _check_names(changes)
        new = dataclasses.replace(self, **changes)
        object.__setattr__(new, "_preset", getattr(self, "_preset", "connectx"))
        return new

    def validate(self) -> PacketParams:
        """InputError for values no run can use; returns self."""
        if self.mtu_bytes <= 0 or self.header_bytes < 0:
            raise InputError("mtu_bytes", "needs mtu_bytes > 0 and header_bytes >= 0")
        if not 0 <= self.data_priority < 8:
            raise InputError("data_priority", f"must be 0..7, got {self.data_priority}")
        if not (0 <= self.kmin_bytes <= self.kmax_bytes and 0 <= self.pmax <= 1):
            raise InputError("kmin_bytes", "needs 0 <= kmin <= kmax and 0 <= pmax <= 1")
        if not 0 < self.g <= 1:
            raise InputError("g", f"must be in (0, 1], got {self.g}")
        for name in ("alpha_interval_s", "rp_timer_s", "byte_counter_bytes", "buffer_bytes"):
            if getattr(self, name) <= 0:
                raise InputError(name, f"must be > 0, got {getattr(self, name)}")
        return self


def _check_names(values: dict) -> None:
    names = {f.name for f in dataclasses.fields(PacketParams)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise InputError(unknown[0], "not a packet parameter; see hpnsim.packet.PacketParams")


_PAPER = "DCQCN paper (Zhu et al. SIGCOMM'15)"
_SIMAI = "SimAI ns-3 backend as shipped (aliyun/SimAI SimAI.conf)"

#: preset name -> {field: (value, source)} on top of the defaults
PRESETS: dict[str, dict[str, tuple[Any, str]]] = {
    "connectx": {},
    "dcqcn_paper": {
        "g": (1 / 256, f"{_PAPER}: g = 1/256"),
        "alpha_interval_s": (55e-6, f"{_PAPER}: alpha update timer 55 us"),
        "rate_decrease_interval_s": (0.0, f"{_PAPER}: every CNP cuts the rate"),
        "clamp_target_rate": (True, f"{_PAPER}: every cut sets Rt = Rc"),
        "rp_timer_s": (55e-6, f"{_PAPER}: rate increase timer 55 us"),
        "byte_counter_bytes": (10e6, f"{_PAPER}: byte counter 10 MB"),
        "fast_recovery_steps": (5, f"{_PAPER}: F = 5"),
        "rate_ai_bytes_s": (40e6 / 8, f"{_PAPER}: R_AI 40 Mb/s"),
        "rate_hai_bytes_s": (40e6 / 8, "R_HAI = R_AI: the CoNEXT'16 fluid model has no hyper "
                                   "increase stage"),
        "cnp_interval_s": (50e-6, f"{_PAPER}: CNP interval 50 us"),
        "kmin_bytes": (5e3, f"{_PAPER}: Kmin 5 KB"),
        "kmax_bytes": (200e3, f"{_PAPER}: Kmax 200 KB"),
        "pmax": (0.01, f"{_PAPER}: Pmax 1%"),
    },
    "simai": {
        "alpha_interval_s": (1e-6, f"{_SIMAI}: alpha interval 1 us"),
        "rate_decrease_interval_s": (4e-6, f"{_SIMAI}: decrease interval 4 us"),
        "rp_timer_s": (900e-6, f"{_SIMAI}: RP timer 900 us"),
        "g": (1 / 256, f"{_SIMAI}: g = 1/256"),
        "fast_recovery_steps": (1, f"{_SIMAI}: fast recovery 1"),
        "rate_ai_bytes_s": (50e6 / 8, f"{_SIMAI}: AI 50 Mb/s"),
        "rate_hai_bytes_s": (100e6 / 8, f"{_SIMAI}: HAI 100 Mb/s"),
        "min_rate_bytes_s": (100e6 / 8, f"{_SIMAI}: min rate 100 Mb/s"),
    },
}


def preset(name: str, **overrides) -> PacketParams:
    """The parameter set of a preset, with overrides.

    >>> preset("simai", cc=False).rp_timer_s
    0.0009
    """
    if name not in PRESETS:
        raise InputError("preset", f"choose one of {', '.join(PRESETS)}, got {name!r}")
    values = {k: v for k, (v, _) in PRESETS[name].items()}
    values.update(overrides)
    _check_names(values)
    p = PacketParams(**values).validate()
    object.__setattr__(p, "_preset", name)
    return p


def load_params(path_or_dict) -> PacketParams:
    """Parameters from a YAML file (or a dict): an optional ``preset`` and field overrides.

    >>> load_params({"preset": "dcqcn_paper", "pmax": 0.05}).pmax
    0.05
    """
    import yaml

    if isinstance(path_or_dict, dict):
        data = dict(path_or_dict)
    else:
        data = yaml.safe_load(Path(path_or_dict).read_text()) or {}
        if not isinstance(data, dict):
            raise InputError("params", f"{path_or_dict}: expected a mapping")
    name = data.pop("preset", "connectx")
    return preset(name, **data)


def params_dict(params: PacketParams) -> dict[str, dict[str, Any]]:
    """The set in effect as ``{name: {"value", "source"}}``; a value that differs from its
    preset's and the defaults is marked ``"source": "set by the user"``.

    >>> params_dict(preset("dcqcn_paper"))["kmin_bytes"]["source"]
    "DCQCN paper (Zhu et al. SIGCOMM'15): Kmin 5 KB"
    """
    chosen = PRESETS.get(getattr(params, "_preset", "connectx"), {})
    out = {}
    for f in dataclasses.fields(params):
        value = getattr(params, f.name)
        if f.name in chosen and chosen[f.name][0] == value:
            source = chosen[f.name][1]
        elif value == f.default:
            source = f.metadata["source"]
        else:
            source = "set by the user"
        out[f.name] = {"value": value, "source": source}
    return out
