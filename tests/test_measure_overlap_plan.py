"""tools/measure_overlap.py: its plan covers what the contention model needs measured, and it
refuses bad input before touching a GPU (the measurements themselves need one)."""

import importlib.util
from pathlib import Path

from hpnsim.training.userbuffers import USERBUFFERS

TOOL = Path(__file__).resolve().parents[1] / "tools" / "measure_overlap.py"
spec = importlib.util.spec_from_file_location("measure_overlap", TOOL)
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)


def test_holder_sms_cover_every_num_sm_the_recipes_set():
    used = {o.sms for cfg in USERBUFFERS.values() for o in cfg.overlaps if o.sms}
    assert used <= set(tool.HOLDER_SMS)


def test_plan_is_every_case_for_every_gemm_and_dtype():
    plan = tool.plan()
    per = 1 + len(tool.HOLDER_SMS) * (len(tool.HOLD) + 2)
    assert len(plan) == len(tool.GEMMS) * 2 * per
    for label, m, n, k in tool.GEMMS:
        for dtype in ("bf16", "fp8"):
            mine = [r for r in plan if r["label"] == label and r["dtype"] == dtype]
            assert mine[0]["case"] == "alone"        # the baseline first: later rows divide by it
            assert {(r["case"], r["sms"], r["hold"]) for r in mine[1:]} == {
                *(("holder", c, h) for c in tool.HOLDER_SMS for h in tool.HOLD),
                *(("margin", c, 0.0) for c in tool.HOLDER_SMS),
                *(("margin+holder", c, tool.HOLD[0]) for c in tool.HOLDER_SMS)}
            assert all(r["shape"] == (m, n, k) and m % 16 == n % 16 == k % 16 == 0 for r in mine)


def test_bad_input_is_refused_before_any_gpu_work(tmp_path, capsys):
    out = tmp_path / "o.csv"
    out.write_text("kept")
    assert tool.main(["--out", str(out)]) == 2
    assert "--out" in capsys.readouterr().err and out.read_text() == "kept"
    assert tool.main(["--out", str(tmp_path / "n.csv"), "--budget-s", "0"]) == 2
    assert "--budget-s" in capsys.readouterr().err
