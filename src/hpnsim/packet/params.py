"""The packet engine's parameters: one frozen dataclass, every default with its source.

Four presets name where a whole set comes from: ``connectx`` (the default: NVIDIA
ConnectX/BlueField firmware DCQCN defaults, SimAI's shipped ECN and PFC settings for 400G
ports, a Spectrum-4 switch's shared buffer), ``spectrum4`` (the same with the switch
vendor's RoCE ECN defaults: NVIDIA Cumulus Linux on Spectrum-4), ``dcqcn_paper`` (Zhu et al.,
SIGCOMM'15, the parameters the CoNEXT'16 fluid model analyses) and ``simai`` (aliyun/SimAI's
ns-3 backend as shipped, 32 MB buffers). Sources: /work/shared/reference/
congestion.md and docs/packet.md.

>>> p = PacketParams()
>>> p.kmin_bytes, p.g
(800000.0, 0.0048828125)
>>> preset("dcqcn_paper").cnp_interval_s
5e-05
>>> PacketParams(ecn_mark_at="enqueue").ecn_mark_at
<MarkPoint.ENQUEUE: 'enqueue'>
>>> params_dict(p.replace(cc=False))["cc"]
{'value': False, 'source': 'set by the user'}
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpnsim.errors import InputError
from hpnsim.packet.kinds import MarkPoint

__all__ = ["PacketParams", "preset", "load_params", "params_dict", "PRESETS"]


def _f(value, source: str):
    return field(default=value, metadata={"source": source})


_CX = ("NVIDIA ConnectX firmware default (NVConfig; NVIDIA DOCA 3.4.0 'DCQCN CC Parameters', "
       "and as 'mlxconfig query' reports it)")
_SIMAI400 = "SimAI ns-3 backend as shipped, 400G ports (aliyun/SimAI SimAI.conf)"


@dataclass(frozen=True)
class PacketParams:
    """Parameters of NICs (DCQCN), switches (shared buffer, ECN, PFC) and packets.

    Rates are bytes/s, sizes bytes, times seconds. ``metadata['source']`` of each field says
    where its default comes from; :func:`params_dict` prints them.
    """

    # --- packets ---------------------------------------------------------------------
    mtu_bytes: int = _f(4096, "RoCE path MTU 4096 B: the largest IB MTU (IBV_MTU_4096, "
                               "rdma-core ibv_modify_qp(3)); a RoCE port's active_mtu is the "
                               "largest IB MTU that fits the Ethernet MTU less the RoCE "
                               "headers (Linux include/rdma/ib_addr.h iboe_get_mtu), 4096 on "
                               "a 9000-B jumbo port; NCCL 2.18.3 src/transport/net_ib.cc sets "
                               "path_mtu to the smaller active_mtu of the two ports")
    header_bytes: int = _f(62, "RoCEv2 frame of an RDMA WRITE middle packet: Ethernet 14 + "
                                "IPv4 20 + UDP 8 + BTH 12 + ICRC 4 (Linux "
                                "include/rdma/ib_pack.h IB_*_BYTES) + FCS 4 (IEEE 802.3 "
                                "clause 3.2.9); no VLAN tag (DSCP-based priority); the RETH "
                                "(16 B) of a WRITE's first packet is left out")
    framing_bytes: int = _f(20, "Ethernet line overhead per frame outside the frame: "
                                 "preamble 7 + SFD 1 (IEEE 802.3 clauses 3.2.1-3.2.2) + minimum "
                                 "inter-packet gap 12 (96 bit times, clause 4.4.2); on the wire "
                                 "of Ethernet links, not in buffers")
    cnp_bytes: int = _f(78, "RoCEv2 CNP frame: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 "
                             "(opcode 0x81) + 16 reserved + ICRC 4 + FCS 4 (IBTA RoCEv2 "
                             "Annex A17 CNP format, as scapy's contrib/roce.py builds it)")
    ack_bytes: int = _f(66, "RoCEv2 ACK/NAK frame: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + "
                             "AETH 4 + ICRC 4 + FCS 4 (AETH: InfiniBand Architecture "
                             "Specification vol. 1, ACK extended transport header)")
    data_priority: int = _f(3, "RoCE lossless class: priority 3 (DSCP 26) with PFC on it, the "
                                "vendors' RoCE configuration (Broadcom Thor2 default 'RoCE "
                                "traffic DSCP 26 on priority 3', Juniper AI-DC JVD; Dell OS10 "
                                "default map DSCP 24/26 -> TC 3); NCCL itself sends traffic "
                                "class 0 unless NCCL_IB_TC is set (NCCL 2.18.3 net_ib.cc "
                                "NCCL_IB_TC 0), so the class comes from the NIC's RoCE ToS")
    cnp_priority: int = _f(6, "ConnectX firmware CNP_802P_PRIO 6 with CNP_DSCP 48, as a "
                               "device's 'mlxconfig query' reports them (set at run time as "
                               "np_cnp_prio / np_cnp_dscp, Linux drivers/infiniband/hw/mlx5/"
                               "cong.c): CNPs ride their own class, above the data's")
    # --- reliable transport (RC QP at the NIC) ---------------------------------------
    retransmit: bool = _f(True, "on: go-back-N as RoCE NICs do (IRN, Mittal et al. "
                                "SIGCOMM'18 sec. 2: the receiver discards out-of-order "
                                "packets and NAKs the expected PSN; the sender resends from it)")
    rto_s: float = _f(4.096e-6 * 2**18, "local ACK timeout 4.096 us x 2^timeout "
                                         "(ibv_modify_qp(3)) with NCCL 2.18.3's NCCL_IB_TIMEOUT "
                                         "18 (net_ib.cc): 1.07 s (NCCL 2.27 uses 20: 4.3 s)")
    retry_count: int = _f(7, "NCCL 2.18.3 NCCL_IB_RETRY_CNT 7 (net_ib.cc): after 7 timeouts "
                              "in a row the QP fails (the flow stays unfinished)")
    # --- DCQCN reaction point (sender NIC) --------------------------------------------
    cc: bool = _f(True, "on: DCQCN is the RoCE congestion control of ConnectX NICs")
    g: float = _f(5 / 1024, f"{_CX}: DCE_TCP_G 1019, g = (1024 - 1019)/1024")
    alpha_interval_s: float = _f(1e-6, f"{_CX}: DCE_TCP_RTT 1 us (alpha update period)")
    rate_decrease_interval_s: float = _f(4e-6, f"{_CX}: RATE_REDUCE_MONITOR_PERIOD 4 us")
    rp_timer_s: float = _f(300e-6, f"{_CX}: RPG_TIME_RESET 300 us")
    byte_counter_bytes: float = _f(32767.0, f"{_CX}: RPG_BYTE_RESET 32,767 B")
    fast_recovery_steps: int = _f(1, "ConnectX firmware default RPG_THRESHOLD 1 (the count F of "
                                     "byte-counter or timer stages before the rate-increase "
                                     "state machine leaves fast recovery): the 'Default' column "
                                     "of 'mstconfig -e query' on a ConnectX-4 Lx "
                                     "(k8snetworkplumbingwg/sriov-network-operator's mlxutils "
                                     "test fixture) and the query of a BlueField-3 B3220, "
                                     "firmware 32.43.1014, whose other DCQCN values are DOCA's "
                                     "defaults; DOCA lists one default for ConnectX-4 and "
                                     "later. The 5 of the legacy mlxconfig help text is a "
                                     "ConnectX-3 QCN default (its neighbours there: time reset "
                                     "2 us, byte reset 150 B, min rate 2,000 Mb/s); the DCQCN "
                                     "paper's F is 5 (preset dcqcn_paper); SimAI ships 1")
    rate_ai_bytes_s: float = _f(5e6 / 8, f"{_CX}: RPG_AI_RATE 5 Mb/s")
    rate_hai_bytes_s: float = _f(50e6 / 8, f"{_CX}: RPG_HAI_RATE 50 Mb/s")
    min_rate_bytes_s: float = _f(1e6 / 8, f"{_CX}: RPG_MIN_RATE 1 Mb/s")
    clamp_target_rate: bool = _f(False, f"{_CX}: CLAMP_TGT_RATE 0 with "
                                        "CLAMP_TGT_RATE_AFTER_TIME_INC 1: a cut sets Rt = Rc only "
                                        "after a timer increase (ns-3 'mlx' DCQCN, SimAI)")
    # --- DCQCN notification point (receiver NIC) ---------------------------------------
    cnp_interval_s: float = _f(4e-6, f"{_CX}: MIN_TIME_BETWEEN_CNPS 4 us")
    # --- switch: ECN (RED on egress occupancy) -----------------------------------------
    ecn: bool = _f(True, "on: DCQCN needs ECN marking at switches")
    kmin_bytes: float = _f(800e3, f"{_SIMAI400}: Kmin 800 KB")
    kmax_bytes: float = _f(3200e3, f"{_SIMAI400}: Kmax 3,200 KB")
    pmax: float = _f(0.2, f"{_SIMAI400}: Pmax 0.2")
    ecn_mark_at: MarkPoint = _f(MarkPoint.DEQUEUE,
                                "dequeue: the queue a packet leaves behind decides its mark. "
                                "SONiC's ECN suite checks egress (dequeue) marking on the "
                                "switch ASICs it runs on (sonic-net/sonic-mgmt tests/"
                                "snappi_tests/ecn/test_dequeue_ecn_with_snappi.py: a queue "
                                "built under PFC pause drains with its first packets marked "
                                "and its last unmarked; passing on NVIDIA Spectrum SKUs and "
                                "Broadcom Trident 3, sonic-mgmt issue #25004; PR #25082 "
                                "names Broadcom TD2-TD4 and TH-TH5, Mellanox SPC, Cisco "
                                "8000; Broadcom DNX, a VOQ chip, differs); the ns-3 RoCE "
                                "model of HPCC and SimAI marks on dequeue against the bytes "
                                "left (alibaba-edu/High-Precision-Congestion-Control "
                                "switch-node.cc SwitchNotifyDequeue, switch-mmu.cc "
                                "ShouldSendCN)")
    # --- switch: shared buffer and PFC ---------------------------------------------------
    buffer_bytes: float = _f(158_229_504.0, "NVIDIA Spectrum-4 (SN5600, 51.2T): egress lossless "
                                            "pool 158,229,504 B, the switch's shared buffer as "
                                            "NVIDIA configures it for SONiC (sonic-buildimage "
                                            "device/mellanox/x86_64-nvidia_sn5600-r0/Mellanox-"
                                            "SN5600-C256S1/buffers_defaults_t0.j2 @d08a8e6; its "
                                            "ingress lossless pool, 132,217,856 B, is what is left "
                                            "after 256 x 200G ports' headroom, ~102 KB each); "
                                            "SimAI ships 32 MB")
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

    def __post_init__(self):
        if not isinstance(self.ecn_mark_at, MarkPoint):      # a name from YAML or the CLI
            try:
                value = MarkPoint(str(self.ecn_mark_at).lower())
            except ValueError:
                raise InputError("ecn_mark_at", "choose one of "
                                 f"{', '.join(m.value for m in MarkPoint)}, got "
                                 f"{self.ecn_mark_at!r}") from None
            object.__setattr__(self, "ecn_mark_at", value)

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
        for name in ("data_priority", "cnp_priority"):
            if not 0 <= getattr(self, name) < 8:
                raise InputError(name, f"must be 0..7, got {getattr(self, name)}")
        for name in ("framing_bytes", "cnp_bytes", "ack_bytes", "retry_count"):
            if getattr(self, name) < 0:
                raise InputError(name, f"must be >= 0, got {getattr(self, name)}")
        if not self.rto_s > 0:
            raise InputError("rto_s", f"must be > 0, got {self.rto_s}")
        if not (0 <= self.kmin_bytes <= self.kmax_bytes and 0 <= self.pmax <= 1):
            raise InputError("kmin_bytes", "needs 0 <= kmin <= kmax and 0 <= pmax <= 1")
        if not 0 < self.g <= 1:
            raise InputError("g", f"must be in (0, 1], got {self.g}")
        for name in ("alpha_interval_s", "rp_timer_s", "byte_counter_bytes", "buffer_bytes"):
            if getattr(self, name) <= 0:
                raise InputError(name, f"must be > 0, got {getattr(self, name)}")
        for f in dataclasses.fields(self):   # every duration, rate, size and share: >= 0
            value = getattr(self, f.name)     # (inf is a value: an unbounded buffer)
            if isinstance(value, int | float) and not isinstance(value, bool) \
                    and not value >= 0:
                raise InputError(f.name, f"must be >= 0, got {value}")
        return self


def _check_names(values: dict) -> None:
    names = {f.name for f in dataclasses.fields(PacketParams)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise InputError(unknown[0], "not a packet parameter; see hpnsim.packet.PacketParams")


_PAPER = "DCQCN paper (Zhu et al. SIGCOMM'15)"
_NV_ROCE = ("NVIDIA Cumulus Linux 5.14 default RoCE configuration on Spectrum-4 ('nv set qos "
            "roce', docs 'RDMA over Converged Ethernet - RoCE', CumulusNetworks/docs @1ffba62)")
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
    "spectrum4": {
        "kmin_bytes": (150e3, f"{_NV_ROCE}: ECN min threshold 150,000 B"),
        "kmax_bytes": (1_501_500.0, f"{_NV_ROCE}: ECN (max) threshold 1,501,500 B"),
        "pmax": (1.0, f"{_NV_ROCE}: marking probability 100%"),
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
        "buffer_bytes": (32 * 2**20, f"{_SIMAI}: 32 MB shared buffer per switch"),
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


#: old parameter name -> its name now; a parameter file may use the old one for one release
#: (deprecated): ``control_bytes`` became ``cnp_bytes`` when NACKs got their own ``ack_bytes``
RENAMED = {"control_bytes": "cnp_bytes"}


def _renamed(data: dict) -> dict:
    """``data`` with old parameter names (:data:`RENAMED`) replaced by the new ones, each with
    a DeprecationWarning; an old name given with its new one is an InputError."""
    for old, new in RENAMED.items():
        if old not in data:
            continue
        if new in data:
            raise InputError(old, f"give {new} only ({old} is its old name)")
        warnings.warn(f"packet parameter {old} is deprecated: it is now {new}; the old name "
                      "goes in the next release", DeprecationWarning, stacklevel=3)
        data[new] = data.pop(old)
    return data


def load_params(path_or_dict) -> PacketParams:
    """Parameters from a YAML file (or a dict): an optional ``preset`` and field overrides.
    A renamed parameter's old name (:data:`RENAMED`) is still read, with a
    DeprecationWarning.

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
    return preset(name, **_renamed(data))


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
