"""Reliability economics: closed forms written here, the Monte Carlo against them, the CLI."""

from __future__ import annotations

import json
import math

import pytest
import typer
from typer.testing import CliRunner

from hpnsim.cli import reliability as reliability_cli
from hpnsim.errors import InputError
from hpnsim.fabrics import build_fabric, hpn7
from hpnsim.faults.montecarlo import monte_carlo
from hpnsim.faults.reliability import (
    CheckpointPolicy,
    Conditions,
    FailureRates,
    compare_designs,
    expected_reliability,
    job_exposure,
)

P_LINK, P_TOR = 0.057e-2, 0.051e-2        # HPN's published monthly rates
MONTH_H = 8760 / 12


def small(design: str):
    """16 hosts x 8 GPUs in one segment: 128 NICs, 8 ToRs (single) or 8 pairs (dual)."""
    return job_exposure(hpn7(segments=1, hosts_per_segment=16, dual_tor=design), 128)


def down(rate, hours):
    """P(down) with Poisson failures and repairs of mean ``hours`` (M/G/inf busy)."""
    return 1 - math.exp(-rate * hours / MONTH_H)


def test_single_tor_hand_example():
    r = expected_reliability(small("single"), Conditions(FailureRates(), CheckpointPolicy(), 1))
    assert r.exposure["access_links"] == 128 and r.exposure["tors"] == 8
    assert r.interruptions_per_month == pytest.approx(128 * P_LINK + 8 * P_TOR, rel=1e-12)
    chassis = Conditions(FailureRates(), CheckpointPolicy(), 1, switch="chassis",
                         chassis_factor=3.0)
    r3 = expected_reliability(small("single"), chassis)
    assert r3.interruptions_per_month == pytest.approx(128 * P_LINK + 3 * 8 * P_TOR, rel=1e-12)


def test_nonstacked_closed_form_and_ratio_to_single():
    hours = 4.0
    rates = FailureRates(link_repair_hours=hours, switch_repair_hours=hours)
    cond = Conditions(rates, CheckpointPolicy(), 1)
    ul, ut = down(P_LINK, hours), down(P_TOR, hours)
    # a link failure cuts its NIC off if the NIC's other link or other ToR is down; a ToR
    # failure if its sibling or the other link of any of its 16 NICs is down
    by_hand = 256 * P_LINK * (1 - (1 - ul) * (1 - ut)) \
        + 16 * P_TOR * (1 - (1 - ut) * (1 - ul) ** 16)
    non = expected_reliability(small("nonstacked"), cond).interruptions_per_month
    single = expected_reliability(small("single"), cond).interruptions_per_month
    assert non == pytest.approx(by_hand, rel=1e-9)
    # first order: 256 l (ul + ut) + 16 t (ut + 16 ul); about 1.7e-5 of the single-ToR rate
    first_order = 256 * P_LINK * (ul + ut) + 16 * P_TOR * (ut + 16 * ul)
    assert non == pytest.approx(first_order, rel=1e-3)
    assert single / non == pytest.approx((128 * P_LINK + 8 * P_TOR) / by_hand, rel=1e-9)
    assert 5e4 < single / non < 7e4


def test_stacked_adds_pair_loss():
    cond = Conditions(FailureRates(), CheckpointPolicy(), 1, stacked_pair_loss=0.25)
    ul, ut = down(P_LINK, FailureRates().link_repair_hours), down(P_TOR, FailureRates().
                                                                  switch_repair_hours)
    tor_p = 0.25 + 0.75 * (1 - (1 - ut) * (1 - ul) ** 16)
    by_hand = 256 * P_LINK * (1 - (1 - ul) * (1 - ut)) + 16 * P_TOR * tor_p
    assert expected_reliability(small("stacked"), cond).interruptions_per_month == \
        pytest.approx(by_hand, rel=1e-9)
    with pytest.raises(InputError, match="stacked_pair_loss"):
        expected_reliability(small("stacked"), Conditions(FailureRates(), CheckpointPolicy(), 1))


def test_lost_gpu_hours_hand_example():
    policy = CheckpointPolicy(interval_s=7200, write_s=100, restart_s=300, detection_s=120)
    r = expected_reliability(small("single"), Conditions(FailureRates(), policy, 2.5))
    rate = 128 * P_LINK + 8 * P_TOR
    per_hit = (3600 + 120 + 300) / 3600 * 128       # half interval + detection + restart
    writing = 100 / 7200 * MONTH_H * 128            # share of time writing, all GPUs
    assert r.rollback_restart_gpu_hours_per_month == pytest.approx(rate * per_hit, rel=1e-12)
    assert r.checkpoint_gpu_hours_per_month == pytest.approx(writing, rel=1e-12)
    assert r.lost_gpu_hours_per_month == pytest.approx(rate * per_hit + writing, rel=1e-12)
    assert r.cost_per_month == pytest.approx(2.5 * (rate * per_hit + writing), rel=1e-12)


def test_exposure_of_3072_gpus_on_hpn7():
    counts = job_exposure(hpn7(), 3072).counts()
    # 3 segments of 128 hosts: 16 ToRs each, 2 access links per NIC, 60 Aggs per plane
    assert counts == {"gpus": 3072, "hosts": 384, "nics": 3072, "access_links": 6144,
                      "tors": 48, "aggs": 120, "tor_uplinks": 48 * 60, "core_links": 0}
    single = job_exposure(hpn7(dual_tor="single"), 3072).counts()
    assert (single["access_links"], single["tors"]) == (3072, 6 * 8)   # 64 hosts/segment


def _within(mc, expected, sigmas=4.0):
    s = mc["interruptions_per_month"]
    error = s["std"] / math.sqrt(mc["months"])
    assert abs(s["mean"] - expected) <= sigmas * error, (s["mean"], expected, error)


@pytest.mark.parametrize("design,q", [("single", None), ("nonstacked", None), ("stacked", 0.3)])
def test_monte_carlo_mean_agrees_with_formula(design, q):
    # high rates and long repairs, so that dual-ToR double failures happen in the draw
    rates = FailureRates(link_per_month=0.05, tor_per_month=0.1, link_repair_hours=100,
                         switch_repair_hours=200)
    cond = Conditions(rates, CheckpointPolicy(), 1, stacked_pair_loss=q)
    exposure = small(design)
    expected = expected_reliability(exposure, cond).interruptions_per_month
    mc = monte_carlo(exposure, cond, years=1500, seed=11)
    _within(mc, expected)   # within 4 standard errors of the mean (seeded)
    assert mc["interruptions_per_month"]["mean"] > 0.1


def test_monte_carlo_default_rates_single_and_spread():
    cond = Conditions(FailureRates(), CheckpointPolicy(), 2.0)
    exposure = job_exposure(hpn7(dual_tor="single"), 3072)
    expected = 3072 * P_LINK + 48 * P_TOR
    mc = monte_carlo(exposure, cond, years=2000, seed=5)
    _within(mc, expected)
    # monthly interruptions are Poisson(1.78): p5 = 0, p50 = 2, p95 = 4
    s = mc["interruptions_per_month"]
    assert (s["p5"], s["p50"], s["p95"]) == (0.0, 2.0, 4.0)
    assert mc == monte_carlo(exposure, cond, years=2000, seed=5)   # same seed, same draw


def test_compare_orders_designs():
    cond = Conditions(FailureRates(), CheckpointPolicy(), 2.0, stacked_pair_loss=0.5,
                      chassis_factor=3.0)
    rows = compare_designs("hpn7", {}, 3072, cond)
    assert [(r.design, r.switch) for r in rows] == [
        (d, s) for d in ("single", "stacked", "nonstacked") for s in ("single-chip", "chassis")]
    rate = {(r.design, r.switch): r.interruptions_per_month for r in rows}
    assert rate[("stacked", "single-chip")] == pytest.approx(0.5 * 48 * P_TOR, rel=1e-3)
    assert rate[("single", "single-chip")] > rate[("stacked", "single-chip")] \
        > rate[("nonstacked", "single-chip")]


runner = CliRunner()
# the command on its own root app, as cli/main.py registers it
app = typer.Typer()
app.callback()(lambda: None)
reliability_cli.register(app)


def cli(*args):
    return runner.invoke(app, ["reliability", *args])


def test_cli_json_keys_and_values():
    result = cli("--fabric", "hpn7", "--gpus", "3072", "--dual-tor", "single",
                 "--gpu-hour-price", "2", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["interruptions_per_month"] == pytest.approx(3072 * P_LINK + 48 * P_TOR)
    per_hit = (5400 + 600 + 100) / 3600 * 3072
    writing = 100 / 10800 * MONTH_H * 3072
    lost = out["interruptions_per_month"] * per_hit + writing
    assert out["lost_gpu_hours_per_month"] == pytest.approx(lost)
    assert out["cost_per_month"] == pytest.approx(2 * lost)


def test_cli_compare_and_monte_carlo_json():
    result = cli("--gpus", "1024", "--gpu-hour-price", "2", "--compare",
                 "--stacked-pair-loss", "0.5", "--monte-carlo", "--years", "50", "--seed", "3",
                 "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert [d["design"] for d in out["designs"]] == ["single", "stacked", "nonstacked"]
    run = out["monte_carlo"][0]
    assert run["months"] == 600 and set(run["interruptions_per_month"]) >= {"mean", "p5", "p50",
                                                                          "p95"}


@pytest.mark.parametrize("args,field", [
    (["--dual-tor", "double"], "--dual-tor"),
    (["--gpus", "20000"], "--gpus"),
    (["--link-per-month", "-0.1"], "--link-per-month"),
    (["--dual-tor", "stacked"], "--stacked-pair-loss"),
    (["--dual-tor", "stacked", "--stacked-pair-loss", "1.5"], "--stacked-pair-loss"),
    (["--switch", "chassis"], "--chassis-factor"),
    (["--checkpoint-interval", "0s"], "--checkpoint-interval"),
    (["--monte-carlo", "--years", "0"], "--years"),
])
def test_cli_bad_input_exits_2_with_one_line(args, field):
    base = ["--gpus", "3072", "--gpu-hour-price", "2"]
    result = cli(*base, *args)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: "), result.output


def test_rates_file(tmp_path):
    good = tmp_path / "rates.yaml"
    good.write_text("link_per_month: 0.001\ntor_per_month: 0.002\n")
    result = cli("--gpus", "3072", "--dual-tor", "single", "--gpu-hour-price", "1", "--rates",
                 str(good), "--json")
    assert json.loads(result.output)["interruptions_per_month"] == \
        pytest.approx(3072 * 0.001 + 48 * 0.002)
    bad = tmp_path / "bad.json"
    bad.write_text('{"link_rate": 0.001}')
    result = cli("--gpus", "3072", "--gpu-hour-price", "1", "--rates", str(bad))
    assert result.exit_code == 2 and result.output.startswith("error: --rates: unknown key")


def test_build_fabric_single_holds_fewer_gpus():
    # the single-ToR hpn7 pod has 64 hosts per segment: 7,680 GPUs
    with pytest.raises(InputError, match="1..7,680"):
        job_exposure(build_fabric("hpn7", {"dual_tor": "single"}), 7681)
