"""HPN's segment and pod sizes derived from the switch chip and the NIC (what hpn7 defaults to).

The HPN paper sizes its 51.2T pod by radix (section 5, 6.2 and Figure 7); the same rules,
applied to any chip capacity ``C`` and NIC ports of speed ``s``, give its defaults:

- a ToR gives half its capacity to active NIC ports: ``hosts = (C / 2) / (ports a host puts
  on one ToR x s)`` (51.2T, 200G, one port per ToR: 128 hosts);
- backup hosts take one more sixteenth (HPN: 8 backups per 128 active hosts); a stacked pair's
  peer link takes the ports of the backups it displaces (400G peer link = 2 x 200G: 6 left);
- every port left goes up at the ToR-Agg link speed: ``(51.2T - 136 x 200G) / 400G = 60``
  uplinks, one to each of 60 Aggs of the ToR's plane;
- an Agg runs at that link speed (51.2T / 400G = 128 ports), 15:1 toward the core (HPN):
  ``128 / 16 = 8`` up, 120 down;
- a segment of HPN's shape (8 rails, dual plane: 8 ToRs of a plane) takes 8 of an Agg's down
  ports, so a pod holds ``120 // 8 = 15`` segments.

With 102.4T: 256 hosts (+16 backups), 120 uplinks and Aggs per plane, 240 down / 16 up per
Agg, 30 segments of 2,048 GPUs: a 61,440-GPU pod with 480 ToRs and 240 Aggs.
"""

from __future__ import annotations

import math

#: backup hosts per active host (HPN: 8 backups for 128 active hosts per segment)
BACKUP_SHARE = 8 / 128
#: Agg down ports per up port toward the core (HPN: 120 x 400G down, 8 x 400G up)
AGG_CORE_RATIO = 15
#: ToRs of one plane per segment in HPN's shape (8 rails x 2 sides / 2 planes, or 8 x 1 / 1)
HPN_TORS_PER_PLANE = 8


def hpn7_sizes(chip: float, port_speed: float, ports_per_nic: int, uplink_speed: float,
               dual_tor: str, peer_links: int, gpus_per_rail: int = 1) -> dict[str, int]:
    """hpn7's derived defaults for a chip and NIC (bytes/s); see the module docstring.

    ``gpus_per_rail``: GPUs a host puts on one rail (1 on an HGX host; 9 for an NVL72 rack on
    8 rails). Uplinks stop at 1:1 (more would carry nothing a ToR's hosts send).

    >>> hpn7_sizes(51.2e12 / 8, 25e9, 2, 50e9, "nonstacked", 1)
    {'hosts_per_segment': 128, 'backup_hosts': 8, 'tor_uplinks': 60, 'aggs_per_plane': 60, 'agg_core_uplinks': 8, 'segments': 15}
    >>> hpn7_sizes(102.4e12 / 8, 25e9, 2, 50e9, "nonstacked", 1)["segments"]
    30
    >>> hpn7_sizes(51.2e12 / 8, 25e9, 2, 50e9, "nonstacked", 1, gpus_per_rail=9)["tor_uplinks"]
    63
    """
    per_tor = (ports_per_nic if dual_tor == "single" else ports_per_nic // 2) * gpus_per_rail
    hosts = max(1, int(chip / 2 / (per_tor * port_speed) + 1e-9))
    backups = int(hosts * BACKUP_SHARE + 1e-9)
    peer = peer_links if dual_tor == "stacked" else 0
    if peer:  # the peer link takes the ports of the backups it displaces
        backups = max(0, backups - math.ceil(peer * uplink_speed / (per_tor * port_speed)
                                             - 1e-9))
    left = chip - (hosts + backups) * per_tor * port_speed - peer * uplink_speed
    full = math.ceil(hosts * per_tor * port_speed / uplink_speed - 1e-9)   # 1:1
    uplinks = max(1, min(full, int(left / uplink_speed + 1e-9)))
    radix = int(chip / uplink_speed + 1e-9)
    agg_up = max(1, math.ceil(radix / (AGG_CORE_RATIO + 1) - 1e-9))
    segments = max(1, (radix - agg_up) // HPN_TORS_PER_PLANE)
    return {"hosts_per_segment": hosts, "backup_hosts": backups, "tor_uplinks": uplinks,
            "aggs_per_plane": uplinks, "agg_core_uplinks": agg_up, "segments": segments}
