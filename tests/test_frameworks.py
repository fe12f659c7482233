"""The Megatron-Core version a job runs: the table of which release added each option, read
back against the release tags, and the options an older version lacks refused by name."""

import inspect
import re

import pytest

from hpnsim.errors import InputError
from hpnsim.training.frameworks import (
    MEGATRON_CORE_DEFAULT,
    MEGATRON_CORE_FIRST,
    MEGATRON_CORE_SINCE,
)
from hpnsim.training.job import TrainJob

# the first core_vX.Y.0 tag of NVIDIA/Megatron-LM holding the commit that added each flag,
# read with `git log -S<flag>` and `git tag --contains` at d98e8a64dd (see the module)
TAGS = {"overlap_grad_reduce": "core_v0.4.0", "tp_comm_overlap": "core_v0.4.0",
        "overlap_param_gather": "core_v0.4.0", "cp": "core_v0.4.0",
        "first_stage_layers": "core_v0.9.0", "last_stage_layers": "core_v0.9.0",
        "zero_3": "core_v0.10.0", "account_for_embedding": "core_v0.11.0",
        "account_for_loss": "core_v0.11.0", "stage_layers": "core_v0.13.0",
        "cross_entropy_fusion": "core_v0.8.0", "cross_entropy_te": "core_v0.13.0",
        "fp8_recipe": "core_v0.12.0", "fp8_param_gather": "core_v0.9.0",
        "rank_order": "core_v0.7.0", "rank_order_cp_ep": "core_v0.11.0"}
BEFORE_THE_PACKAGE = {"zero_1_2", "selective_recompute", "attention"}
# in every Megatron-LM release tag (v1.0 .. v2.6: --checkpoint-activations)
IN_EVERY_RELEASE = {"recompute"}

# a job using each option alone on llama3-8b (32 layers)
USES = {"zero_1_2": dict(zero=1, dp=2), "zero_3": dict(zero=3, dp=2),
        "recompute": dict(recompute=True), "selective_recompute": dict(selective_recompute=True),
        "attention": dict(attention="flash"),
        "overlap_grad_reduce": dict(overlap_grad_reduce=True),
        "tp_comm_overlap": dict(tp=2, sequence_parallel=True, tp_comm_overlap=True),
        "overlap_param_gather": dict(zero=1, dp=2, overlap_param_gather=True,
                                     overlap_grad_reduce=True),
        "cp": dict(cp=2), "first_stage_layers": dict(pp=2, first_stage_layers=15),
        "last_stage_layers": dict(pp=2, last_stage_layers=15),
        "account_for_embedding": dict(pp=3, account_for_embedding=True),
        "account_for_loss": dict(pp=3, account_for_loss=True),
        "stage_layers": dict(pp=2, stage_layers=[15, 17]),
        "cross_entropy_fusion": dict(cross_entropy="fused"),
        "cross_entropy_te": dict(cross_entropy="te"),
        "fp8_recipe": dict(dtype="fp8", fp8_recipe="current"),
        "fp8_param_gather": dict(dtype="fp8", zero=1, dp=2, fp8_param_gather=True),
        "rank_order": dict(tp=8, pp=2, rank_order="tp-cp-pp-dp"),
        "rank_order_cp_ep": dict(tp=8, pp=2, cp=2, rank_order="tp-cp-pp-dp")}
# table keys that are one value of a TrainJob keyword
VALUE_OF = {"cross_entropy_fusion": "cross_entropy", "cross_entropy_te": "cross_entropy",
            "rank_order_cp_ep": "rank_order"}


def _job(option, version=None):
    kwargs = {"overlap_grad_reduce": False, **USES[option]}
    return TrainJob("llama3-8b", **kwargs, **({} if version is None else
                                               {"megatron_core": version}))


def test_the_table_reads_back_the_release_tags():
    assert (set(MEGATRON_CORE_SINCE) == set(TAGS) | BEFORE_THE_PACKAGE | IN_EVERY_RELEASE
            == set(USES))
    for name, since in MEGATRON_CORE_SINCE.items():
        expected = (0, 1) if name in BEFORE_THE_PACKAGE else (0, 0) if name in IN_EVERY_RELEASE else tuple(
            int(x) for x in re.fullmatch(r"core_v(\d+)\.(\d+)\.0", TAGS[name]).groups())
        assert since.version == expected, name
        assert re.search(r"\b[0-9a-f]{10}\b", since.source), name     # the commit that adds it
        assert since.flag.startswith("--")
        if name in TAGS:
            assert TAGS[name] in since.source
    keywords = inspect.signature(TrainJob).parameters
    assert all(VALUE_OF.get(name, name) in keywords or name.startswith("zero_")
               for name in MEGATRON_CORE_SINCE)
    assert MEGATRON_CORE_DEFAULT == (0, 20) and MEGATRON_CORE_FIRST == (0, 1)


@pytest.mark.parametrize("option", sorted(USES))
def test_each_option_from_its_release_on(option):
    since = MEGATRON_CORE_SINCE[option].version
    assert _job(option).megatron_core == MEGATRON_CORE_DEFAULT     # the default has them all
    if since == (0, 0):
        assert _job(option, "v2.6").megatron_core == since
        return                  # no release before it to refuse
    assert _job(option, f"{since[0]}.{since[1]}").megatron_core == since
    with pytest.raises(InputError) as refused:
        _job(option, "v2.6" if since == MEGATRON_CORE_FIRST
             else f"core_v{since[0]}.{since[1] - 1}.0")
    # overlap_param_gather needs overlap_grad_reduce, from the same release and checked first
    field = {"zero_1_2": "zero", "zero_3": "zero",
             "overlap_param_gather": "overlap_grad_reduce", **VALUE_OF}.get(option, option)
    assert refused.value.field == field
    lacks = ("Megatron-LM before Megatron-Core" if since == MEGATRON_CORE_FIRST
             else f"Megatron-Core 0.{since[1] - 1}")
    assert f"{lacks} lacks it" in refused.value.message


def test_a_version_before_the_package_or_not_text_is_refused():
    with pytest.raises(InputError, match="releases start at 0.1"):
        TrainJob("llama3-8b", megatron_core="0.0")
    with pytest.raises(InputError, match="quoted in YAML"):
        TrainJob("llama3-8b", megatron_core=0.1)


def test_the_json_names_a_version_only_when_it_is_not_the_default():
    assert "megatron_core" not in TrainJob("llama3-8b").to_dict()
    old = TrainJob("llama3-8b", megatron_core="0.9.1", overlap_grad_reduce=False)
    assert old.to_dict()["megatron_core"] == "0.9"


def test_cli_refuses_an_option_the_version_lacks_in_one_line(refused_cli):
    assert refused_cli("train", "--model", "llama3-8b", "--tp", "2", "--sequence-parallel",
                       "--tp-comm-overlap", "--no-overlap-grad-reduce",
                       "--megatron-core", "0.3") == (
        "error: --tp-comm-overlap: Megatron-Core 0.3 lacks it (--tp-comm-overlap arrived in "
        "0.4); give --megatron-core 0.4 or later, or leave it off")


def test_yaml_refuses_by_path(refused_yaml):
    err = refused_yaml("jobs:\n  - model: llama3-8b\n    pp: 2\n    stage_layers: [15, 17]\n"
                       "    megatron_core: '0.12'\n")
    assert err.startswith("error: jobs[0].stage_layers: Megatron-Core 0.12 lacks it "
                          "(--pipeline-model-parallel-layout arrived in 0.13)"), err
