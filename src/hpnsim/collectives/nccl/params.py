"""NCCL realism parameters: protocol and link efficiencies, latencies, channels and QPs.

Every figure that makes a simulated collective slower than the wire lives in one frozen
:class:`NcclParams`, with its source, its bounds (for calibration) and its default. The
simulator and the closed forms read the same object, so a parameter moves both by the same
factor (tests/test_nccl_realism.py).

How each efficiency acts:

- protocol (``eff_simple``, ``eff_ll128``, ``eff_ll``): payload per wire byte of the
  protocol's lines; divides every byte a stage moves (wire = payload / efficiency).
- link (``nvlink_efficiency``, ``network_efficiency``, ``pcie_efficiency``): the fraction of
  a link's nominal rate that carries NCCL payload; a byte crossing such a link loads it with
  1/efficiency (:meth:`NcclParams.link_inflation`).
- ``nvls_efficiency``: what NVSwitch multicast/reduction (NVLS) reaches of NVLink's rate.

Sources: NCCL ``src/graph/tuning.cc`` (protocol factors, NVLS efficiency, latencies, LL128
and tree caps) and ``src/graph/topo.h`` (NCCL's usable NVLink bandwidth per link), the
RoCEv2 and Ethernet framing standards (header bytes), and NCCL's environment variables
(``NCCL_NCHANNELS_PER_NET_PEER``, ``NCCL_IB_QPS_PER_CONNECTION``, ``NCCL_IB_SPLIT_DATA_ON_QPS``,
defaults of NCCL 2.18.3, the HPN paper's version).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from weakref import WeakKeyDictionary

import numpy as np

from hpnsim.collectives.ops import PROTOCOLS
from hpnsim.errors import InputError

#: most channels (rings or trees) one NCCL communicator runs: ``#define MAXCHANNELS 32`` in
#: NCCL's src/include/devcomm.h (the channel arrays of ncclDevComm are this long)
MAXCHANNELS = 32
#: most queue pairs of one NCCL network connection: ``#define NCCL_IB_MAX_QPS 128`` in
#: NCCL's src/transport/net_ib.cc (v2.18.3-1; the QP numbers exchanged per connection)
MAX_QPS = 128

#: RoCEv2 framing per packet, bytes: Ethernet header 14 + FCS 4 + preamble/SFD 8 + minimum
#: inter-frame gap 12 (IEEE 802.3), IPv4 20 (RFC 791), UDP 8 (RFC 768), InfiniBand BTH 12 +
#: ICRC 4 (IBTA Annex A17, RoCEv2)
ROCE_HEADER_BYTES = 14 + 4 + 8 + 12 + 20 + 8 + 12 + 4

#: NCCL's usable NVLink bandwidth per link (topo.h: SM80 20.0, SM90 20.6, SM100 40.1 GB/s)
#: over the link's wire rate per direction (NVLink3/4: 25 GB/s, NVLink5: 50 GB/s)
NVLINK_EFFICIENCY = {"a100": 20.0 / 25.0, "h100": 20.6 / 25.0, "h800": 20.6 / 25.0,
                     "h200": 20.6 / 25.0, "b200": 40.1 / 50.0}
#: GPUs with NVLink SHARP (NVLS), as workloads.gpus marks them (GPUSpec.nvls): every Hopper
#: part on NVSwitch (H100, H800, H200) and B200; NCCL enables NVLS where the device reports
#: CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, on an NVSwitch system of compute capability 9.0+
#: (NCCL 2.18.3 transport/nvls.cc ncclNvlsInit, graph/search.cc)
NVLS_GPUS = ("h100", "h800", "h200", "b200")
#: NVLS efficiency per GPU generation (tuning.cc ``nvlsEfficiency``: Hopper .85, Blackwell .74)
NVLS_EFFICIENCY = {"h100": 0.85, "h200": 0.85, "h800": 0.85, "b200": 0.74}

#: the proxy's post overhead per network step by host CPU, microseconds (tuning.cc
#: ``getNetOverhead``, v2.18.3-1 and v2.29.7-1: 1 on Intel x86, 2 on AMD x86, 1 on any other
#: CPU; NCCL reads the vendor from the topology). Reference hosts: a DGX A100 has two AMD EPYC
#: 7742 (NVIDIA DGX A100 System User Guide DU-09821-001, 1.1.1 Component Specifications), a
#: DGX H100 two Intel Xeon Platinum 8480C (DGX H100 User Guide); the HPN paper does not name
#: its hosts' CPUs.
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0, "other": 1.0}

#: NCCL tuning.cc latencies, microseconds: base (per algorithm, protocol ll/ll128/simple),
#: per hop over NVLink, per hop over the network. NVLS: 25 us NVLink, 18 us network
#: (NVLS tree 20.9 us network), Simple only.
BASE_LATENCY_US = {"ring": (6.6, 14.0, 8.4), "tree": (6.8, 14.0, 8.4), "nvls": (0.0, 0.0, 0.0),
         "nvlstree": (0.0, 0.0, 0.0)}
NVLINK_HOP_US = {"ring": (0.6, 1.9, 3.4), "tree": (0.6, 1.25, 4.0), "nvls": (0.0, 0.0, 25.0),
               "nvlstree": (0.0, 0.0, 25.0)}
NET_HOP_US = {"ring": (2.7, 4.0, 14.0), "tree": (5.0, 8.5, 14.0), "nvls": (0.0, 0.0, 18.0),
            "nvlstree": (0.0, 0.0, 20.9)}

#: bounds of every float parameter (what calibration may fit and a file may set)
BOUNDS = {
    "eff_simple": (0.05, 1.0), "eff_ll128": (0.05, 1.0), "eff_ll": (0.05, 1.0),
    "nvlink_efficiency": (0.05, 1.0), "network_efficiency": (0.05, 1.0),
    "pcie_efficiency": (0.05, 1.0), "nvls_efficiency": (0.05, 1.0),
    "latency_scale": (0.0, 100.0), "ll128_channel_cap": (0.0, 1e13),
    "ll_max_bandwidth": (0.0, 1e13), "tree_bandwidth_derate": (0.05, 1.0),
    "ring_simple_plateau": (1.0, 4.0), "chunk_bytes": (1.0, 1e9), "mtu": (256.0, 9216.0),
    "net_overhead_us": (0.0, 100.0),
}


@dataclass(frozen=True)
class NcclParams:
    """The knobs that make a simulated collective look like NCCL on real hardware.

    Attributes
    ----------
    eff_simple, eff_ll128, eff_ll : protocol payload per wire byte. NCCL tuning.cc: Simple 1,
        LL128 0.92 (``busBw * 0.92``; 120 of 128 bytes per line carry data), LL 0.5 (4 data
        bytes and a 4-byte flag per 8-byte line).
    nvlink_efficiency : NVLink payload per nominal byte; NCCL topo.h SM90_NVLINK_BW 20.6 GB/s
        of 25 GB/s per link and direction (0.824, Hopper; A100 0.8, B200 0.802).
    mtu : RoCE/IB path MTU in bytes (4096, the RoCE maximum); ``network_efficiency`` is
        mtu / (mtu + ROCE_HEADER_BYTES) = 0.9804 unless given.
    pcie_efficiency : PCIe payload per nominal byte on GPU-NIC links (whose capacity already
        counts 128b/130b encoding): 24 bytes of TLP header and framing per 256-byte maximum
        payload (PCIe 4/5 base spec), 256/280 = 0.914.
    nvls_efficiency : NVSwitch multicast/reduction over NVLink (tuning.cc Hopper 0.85).
    nvls : the GPUs support NVLS (H100, H800, H200, B200); ``auto`` weighs it then.
    latency_scale : multiplies every tuning.cc latency (1: NCCL's tables).
    ll128_channel_cap : most bytes/s one LL128 ring channel carries (tuning.cc Hopper 36.7
        GB/s); ll_max_bandwidth : most an LL ring carries in all (tuning.cc llMaxBws Hopper
        one node 141 GB/s; several nodes 45 GB/s is used by ``auto``, see model.py).
    tree_bandwidth_derate : tuning.cc tree all-reduce ``busBw * .92``.
    net_overhead_us : the proxy thread's cost of posting one network step, microseconds
        (tuning.cc ``getNetOverhead``, v2.18.3-1 and v2.29.7-1: 1 on Intel x86 and non-x86
        hosts, 2 on AMD; NCCL_NET_OVERHEAD in ns overrides it; :data:`NET_OVERHEAD_US`,
        ``for_gpu(gpu, cpu=...)``). A ring that spans hosts pays at least this per step
        (times 3 for Simple), inside the hosts too (:meth:`latencies` with ``multi_host``).
    ring_simple_plateau : tuning.cc ring Simple all-reduce latency × 1.4 across nodes on
        Ampere and later ("plateau effect of ring").
    chunk_bytes : bytes one pipeline step carries per channel (Simple: 4 MiB buffer /
        NCCL_STEPS 8 = 512 KiB); the fill of a pipelined hierarchical all-reduce.
    channels_per_nic : ring channels per NIC (None: one per NIC port, NCCL's default of
        one channel per network device).
    channels_per_net_peer : NCCL_NCHANNELS_PER_NET_PEER (NCCL default 2): channels of a
        send/recv between two GPUs on different hosts.
    qps_per_connection : NCCL_IB_QPS_PER_CONNECTION (NCCL default 1): queue pairs per
        connection, each its own UDP source port, so its own ECMP hash.
    split_data_on_qps : NCCL_IB_SPLIT_DATA_ON_QPS: each message split over all QPs (True;
        NCCL 2.18.3's default, ``ncclIbMultiSend`` in net_ib.cc cuts it into ``nqps`` pieces
        of 128-byte multiples and the receive completes when all ``nqps`` have arrived) or
        messages round-robin over the QPs (False; the default from 2.20.3 on); either way
        each QP carries 1/qps of the bytes and a channel moves at qps times its slowest
        QP's rate, so it changes latency only, not the flow model.

    Examples
    --------
    >>> p = NcclParams()
    >>> round(p.network_efficiency, 4), round(p.nvlink_efficiency, 3)
    (0.9804, 0.824)
    >>> p.protocol_efficiency("ll128")
    0.92
    >>> NcclParams(eff_ll=1.5)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: nccl.eff_ll: must be in [0.05, 1.0], got 1.5
    """

    eff_simple: float = 1.0
    eff_ll128: float = 0.92
    eff_ll: float = 0.5
    nvlink_efficiency: float = 20.6 / 25.0
    mtu: float = 4096.0
    network_efficiency: float | None = None
    pcie_efficiency: float = 256 / 280
    nvls_efficiency: float = 0.85
    nvls: bool = False
    latency_scale: float = 1.0
    ll128_channel_cap: float = 36.7e9
    ll_max_bandwidth: float = 141e9
    tree_bandwidth_derate: float = 0.92
    ring_simple_plateau: float = 1.4
    net_overhead_us: float = 1.0
    chunk_bytes: float = 512 * 1024
    channels_per_nic: int | None = None
    channels_per_net_peer: int = 2
    qps_per_connection: int = 1
    split_data_on_qps: bool = True

    def __post_init__(self) -> None:
        if self.network_efficiency is None:
            object.__setattr__(self, "network_efficiency",
                               self.mtu / (self.mtu + ROCE_HEADER_BYTES))
        for name, (low, high) in BOUNDS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float | np.number) \
                    or not low <= float(value) <= high:
                raise InputError(f"nccl.{name}", f"must be in [{low}, {high}], got {value!r}")
        for name, most in (("channels_per_net_peer", 64), ("qps_per_connection", MAX_QPS)):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or not 1 <= value <= most:
                raise InputError(f"nccl.{name}", f"must be an integer in 1..{most}, got "
                                                 f"{value!r}")
        cpn = self.channels_per_nic
        if cpn is not None and (isinstance(cpn, bool) or int(cpn) != cpn or not 1 <= cpn <= 64):
            raise InputError("nccl.channels_per_nic", f"must be an integer in 1..64, got {cpn!r}")

    @classmethod
    def for_gpu(cls, gpu: str, cpu: str | None = None, **overrides) -> NcclParams:
        """Defaults for a GPU model: its NVLink and NVLS efficiencies, NVLS where it exists;
        with ``cpu`` (intel, amd, other; :data:`NET_OVERHEAD_US`) the proxy's post overhead
        NCCL charges on that host CPU (None: 1 µs, NCCL's Intel figure).

        Examples
        --------
        >>> NcclParams.for_gpu("h100").nvls, NcclParams.for_gpu("a100").nvls
        (True, False)
        >>> NcclParams.for_gpu("h800").nvls        # Hopper's NVSwitch has NVLink SHARP
        True
        >>> NcclParams.for_gpu("a100", cpu="amd").net_overhead_us    # a DGX A100's EPYCs
        2.0
        """
        name = str(gpu).strip().lower()
        if name not in NVLINK_EFFICIENCY:
            raise InputError("gpu", f"unknown GPU {gpu!r}; choose from "
                             f"{', '.join(sorted(NVLINK_EFFICIENCY))}")
        base = {"nvlink_efficiency": NVLINK_EFFICIENCY[name],
                "nvls_efficiency": NVLS_EFFICIENCY.get(name, 0.85),
                "nvls": name in NVLS_GPUS}
        if cpu is not None:
            base["net_overhead_us"] = net_overhead_for(cpu)
        return cls(**{**base, **overrides})

    @classmethod
    def from_dict(cls, values: dict) -> NcclParams:
        """Parameters from a mapping (a calibration file); unknown keys are input errors.

        Examples
        --------
        >>> NcclParams.from_dict({"eff_ll128": 0.9}).eff_ll128
        0.9
        """
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise InputError(f"nccl.{unknown[0]}", f"unknown parameter; allowed: "
                             f"{', '.join(sorted(names))}")
        return cls(**values)

    def to_dict(self) -> dict:
        """Plain dict of the fields (``network_efficiency`` resolved).

        Examples
        --------
        >>> d = NcclParams().to_dict()
        >>> d["eff_ll128"], round(d["network_efficiency"], 4)
        (0.92, 0.9804)
        """
        return asdict(self)

    def replace(self, **changes) -> NcclParams:
        """A copy with ``changes``; ``network_efficiency`` follows a new ``mtu`` unless given.

        Examples
        --------
        >>> round(NcclParams().replace(mtu=1024).network_efficiency, 4)
        0.9259
        """
        if "mtu" in changes and "network_efficiency" not in changes:
            changes["network_efficiency"] = None
        return replace(self, **changes)

    def protocol_efficiency(self, protocol: str) -> float:
        """Payload per wire byte of ``protocol`` (ll, ll128, simple).

        Examples
        --------
        >>> NcclParams().protocol_efficiency("ll"), NcclParams(eff_ll=0.4).protocol_efficiency("ll")
        (0.5, 0.4)
        """
        return {"simple": self.eff_simple, "ll128": self.eff_ll128, "ll": self.eff_ll}[protocol]

    def latencies(self, family: str, protocol: str,
                  multi_host: bool = False) -> tuple[float, float, float]:
        """``(base, per NVLink hop, per network hop)`` seconds of an NCCL latency family
        (ring, tree, nvls, nvlstree) and protocol, times ``latency_scale``.

        ``multi_host``: a ring (all-reduce, all-gather, reduce-scatter) that spans hosts,
        whose every step costs at least the proxy's post overhead (``net_overhead_us``,
        times 3 for Simple; tuning.cc: ``intraLat = max(intraLat, netOverhead)``).

        Examples
        --------
        >>> NcclParams().latencies("ring", "simple")
        (8.4e-06, 3.4e-06, 1.4e-05)
        >>> NcclParams().latencies("ring", "ll"), NcclParams().latencies("ring", "ll", True)
        ((6.6e-06, 6e-07, 2.7e-06), (6.6e-06, 1e-06, 2.7e-06))
        """
        i = PROTOCOLS.index(protocol)
        scale = self.latency_scale * 1e-6
        nvlink = NVLINK_HOP_US[family][i]
        if multi_host and family == "ring":
            nvlink = max(nvlink, self.net_overhead_us * (3 if protocol == "simple" else 1))
        return (round(BASE_LATENCY_US[family][i] * scale, 15), round(nvlink * scale, 15),
                round(NET_HOP_US[family][i] * scale, 15))

    def link_inflation(self, fabric) -> np.ndarray:
        """Wire load per payload byte of every link of ``fabric``: 1/efficiency of its kind
        (NVLink, PCIe, network links), cached per fabric object.

        Examples
        --------
        >>> from hpnsim.fabrics import fat_tree
        >>> f = fat_tree(4)
        >>> bool(np.all(NcclParams().link_inflation(f) > 1.0))
        True
        """
        from hpnsim.fabrics.fabric import LinkKind

        cache = _INFLATION.setdefault(fabric, {})
        key = (self.nvlink_efficiency, self.pcie_efficiency, self.network_efficiency)
        found = cache.get(key)
        if found is None:
            kind = fabric.link_kind
            eff = np.where(kind == LinkKind.NVLINK, self.nvlink_efficiency,
                           np.where(kind == LinkKind.PCIE, self.pcie_efficiency,
                                    self.network_efficiency))
            found = 1.0 / eff
            found.flags.writeable = False
            cache[key] = found
        return found


_INFLATION: WeakKeyDictionary = WeakKeyDictionary()


def net_overhead_for(cpu: str) -> float:
    """NCCL's proxy post overhead per network step on a host CPU, microseconds
    (:data:`NET_OVERHEAD_US`, tuning.cc ``getNetOverhead``).

    Examples
    --------
    >>> net_overhead_for("AMD"), net_overhead_for("intel")
    (2.0, 1.0)
    >>> net_overhead_for("power")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: cpu: must be one of intel, amd, other, got 'power'
    """
    key = str(cpu).strip().lower()
    if key not in NET_OVERHEAD_US:
        raise InputError("cpu", f"must be one of {', '.join(NET_OVERHEAD_US)}, got {cpu!r}")
    return NET_OVERHEAD_US[key]

#: every link at its wire rate (NVLink, PCIe, network, NVLS efficiencies 1); protocols and
#: latencies as NCCL's tables: the model before link efficiencies existed
WIRE_RATE = NcclParams(nvlink_efficiency=1.0, network_efficiency=1.0, pcie_efficiency=1.0,
                       nvls_efficiency=1.0)

#: NCCL's payload per wire byte of each protocol (the defaults of :class:`NcclParams`: LL
#: 8-byte lines carry 4 bytes of data plus a flag; LL128 120 of 128 bytes; Simple all)
PROTOCOL_EFFICIENCY = {p: NcclParams().protocol_efficiency(p) for p in PROTOCOLS}


def resolve_nccl(nccl) -> NcclParams:
    """``nccl`` as :class:`NcclParams`: None gives the defaults, a dict is parsed.

    Parameters
    ----------
    nccl : NcclParams, dict or None

    Returns
    -------
    NcclParams

    Raises
    ------
    InputError
        Named ``nccl`` for another type, or ``nccl.<field>`` for a bad value.

    Examples
    --------
    >>> resolve_nccl(None) == NcclParams(), resolve_nccl({"eff_ll": 0.4}).eff_ll
    (True, 0.4)
    """
    if nccl is None:
        return NcclParams()
    if isinstance(nccl, NcclParams):
        return nccl
    if isinstance(nccl, dict):
        return NcclParams.from_dict(nccl)
    raise InputError("nccl", f"must be NcclParams, a dict or None, got {type(nccl).__name__}")
