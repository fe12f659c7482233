"""The check on real neighbour tables: a small HPN built from its plan as Linux network
namespaces (one per device) joined by veth pairs named by the plan's ports, with a swap
within one ToR, a cross-plane swap and a missing cable planted; real lldpd runs in every
namespace and ``lldpcli -f json show neighbors`` is collected from each. The check must
find exactly the planted miswires. Skips (saying why) where namespaces cannot be made or
lldpd is not installed (.ci/run installs Debian's lldpd)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from wiring_tables import built_cables, find, small_plan

from hpnsim.cli.main import run
from hpnsim.wiring.planfile import plan_csv

LLDPD, LLDPCLI = shutil.which("lldpd") or "/usr/sbin/lldpd", \
    shutil.which("lldpcli") or "/usr/sbin/lldpcli"
#: how long lldpd gets to see every neighbour (it sends every second once configured)
SETTLE_S = 20.0


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def _namespaces_work() -> str | None:
    """None when a network namespace can be made here, else why not."""
    if not (os.path.exists(LLDPD) and os.path.exists(LLDPCLI)):
        return "lldpd is not installed (Debian package lldpd)"
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    name = f"hwprobe{os.getpid()}"
    try:
        _ip("netns", "add", name)
    except (subprocess.CalledProcessError, OSError) as exc:
        err = getattr(exc, "stderr", b"") or b""
        return f"cannot create a network namespace: {err.decode().strip() or exc}"
    _ip("netns", "delete", name)
    return None


class Lab:
    """Namespaces, veth pairs and lldpd daemons of one built fabric; all removed by close."""

    def __init__(self, devices: list[str], cables) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="hw", dir="/tmp"))  # short: socket paths
        self.root.chmod(0o755)   # lldpd (dropped to _lldpd) makes its socket in it
        self.ns = {d: f"hw{os.getpid()}-{i}" for i, d in enumerate(devices)}
        self.daemons: list[subprocess.Popen] = []
        self.made: list[str] = []
        self.cables = cables

    def build(self) -> None:
        for ns in self.ns.values():
            _ip("netns", "add", ns)
            self.made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        for (ad, ap), (bd, bp) in self.cables:
            _ip("link", "add", ap, "netns", self.ns[ad], "type", "veth", "peer", "name", bp,
                "netns", self.ns[bd])
            _ip("-n", self.ns[ad], "link", "set", ap, "up")
            _ip("-n", self.ns[bd], "link", "set", bp, "up")

    def start(self) -> None:
        for i, (device, ns) in enumerate(self.ns.items()):
            conf = self.root / f"{i}.conf"
            conf.write_text(f"configure system hostname {device}\n"
                            "configure lldp tx-interval 1\n"
                            "configure lldp portidsubtype ifname\n")
            self.daemons.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, LLDPD, "-d", "-u", str(self.root / f"{i}.sock"),
                 "-p", str(self.root / f"{i}.pid"), "-O", str(conf)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def table(self, i: int, device: str) -> dict | None:
        done = subprocess.run(["ip", "netns", "exec", self.ns[device], LLDPCLI, "-u",
                               str(self.root / f"{i}.sock"), "-f", "json", "show",
                               "neighbors"], capture_output=True, timeout=10)
        return json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() \
            else None

    def collect(self, folder: Path, expected: dict[str, int]) -> float:
        """Write every device's table once each lists its expected neighbours; seconds."""
        start = time.monotonic()
        pending = dict(enumerate(self.ns))
        while pending and time.monotonic() - start < SETTLE_S:
            for i, device in list(pending.items()):
                data = self.table(i, device)
                interfaces = (data or {}).get("lldp", {}).get("interface", [])
                count = len(interfaces) if isinstance(interfaces, list) else 1
                if data is not None and count >= expected.get(device, 0):
                    (folder / f"{device}.json").write_text(json.dumps(data, indent=2))
                    del pending[i]
            if pending:
                time.sleep(0.3)
        assert not pending, f"lldpd saw too few neighbours on {sorted(pending.values())}"
        return time.monotonic() - start

    def close(self) -> None:
        for daemon in self.daemons:
            daemon.terminate()
        for daemon in self.daemons:
            try:
                daemon.wait(timeout=5)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait(timeout=5)
        for ns in self.made:
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True, timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)


def test_real_lldpd_tables_show_exactly_the_planted_miswires(tmp_path, capsys):
    why = _namespaces_work()
    if why:
        pytest.skip(why)
    plan = small_plan()
    within = (find(plan, "pod0-seg0-host0", "nic0p0"), find(plan, "pod0-seg0-host1", "nic0p0"))
    planes = (find(plan, "pod0-seg0-host1", "nic1p0"), find(plan, "pod0-seg0-host1", "nic1p1"))
    missing = find(plan, "pod0-seg0-tor-r1-p1", "swp4")       # an uplink to an Agg
    cables = built_cables(plan, swaps=[within, planes], missing=[missing])
    expected: dict[str, int] = {}
    for (ad, _), (bd, _) in cables:
        expected[ad] = expected.get(ad, 0) + 1
        expected[bd] = expected.get(bd, 0) + 1
    lab = Lab(sorted(plan.devices), cables)
    try:
        lab.build()
        lab.start()
        folder = tmp_path / "lldp"
        folder.mkdir()
        lab.collect(folder, expected)
    finally:
        lab.close()
    leftover = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"hw{os.getpid()}-" not in leftover
    (tmp_path / "plan.csv").write_text(plan_csv(plan))
    with pytest.raises(SystemExit) as done:
        run(["wiring", "check", str(tmp_path / "plan.csv"), "--lldp", str(folder), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert done.value.code == 1
    assert report["matched"] == len(plan.cables) - 5 and report["tables"] == 11
    assert [[(c["a_device"], c["a_port"]) for c in s] + [s[0]["class"]]
            for s in report["swaps"]] == [
        [("pod0-seg0-host0", "nic0p0"), ("pod0-seg0-host1", "nic0p0"), "within_switch"],
        [("pod0-seg0-host1", "nic1p0"), ("pod0-seg0-host1", "nic1p1"), "across_planes"]]
    assert [(m["a_device"], m["a_port"], m["b_device"], m["b_port"])
            for m in report["missing"]] == [
        ("pod0-seg0-tor-r1-p1", "swp4", "pod0-agg-p1-0", "swp2")]
    assert report["unexpected"] == [] and report["one_sided"] == []
