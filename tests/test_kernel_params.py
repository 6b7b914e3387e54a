"""A kernel's parameters, read from its cubin, against what the launch contract passes it
(``worker.cubin_params``): kernels built with the real nvcc; the campaign bests and the
structural variants of every built-in family take their signature's parameters (a workspace
pointer where their launch has one); a user kernel that declares others is a compile error
that says both lists, before any GPU runs it."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest

from core.replay import ReplayDataset
from kernels import get_family
from kernels.base import Dims
from kernels.userspec import build_family, load_spec_dir
from worker.compile import Compiler, candidate_params, compile_candidate, reference_params
from worker.cubin_params import ParamsCheck, format_layout, kernel_params, params_mismatch

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
from bf16_points import bf16_variants  # noqa: E402
from softmax_bulk_points import BULK_PICKS  # noqa: E402
from stream_k_points import variants as stream_k_variants  # noqa: E402

EXAMPLE = TESTS.parent / "examples" / "transpose"
KERNELS = r'''
extern "C" __global__ void scaled(const float* x, float* y, float s, double t, int n)
{ if (threadIdx.x < n) y[threadIdx.x] = x[threadIdx.x] * s + (float)t; }
extern "C" __global__ void bare() { }
extern "C" __global__ void with_workspace(const float* x, float* y, int n, float* ws)
{ if (threadIdx.x < n) { ws[threadIdx.x] = x[threadIdx.x]; y[threadIdx.x] = ws[threadIdx.x]; } }
'''


@pytest.fixture(scope="module")
def cubin(compiler: Compiler) -> bytes:
    result = compiler.compile(KERNELS)
    assert result.status == "ok", result.error
    return result.cubin()


def test_parameters_are_read_as_nvcc_lays_them_out(cubin: bytes) -> None:
    # a float32 at 16, then a float64 aligned to 24, an int32 at 32: C's layout, and pycuda's
    assert kernel_params(cubin, "scaled") == [(0, 8), (8, 8), (16, 4), (24, 8), (32, 4)]
    assert format_layout("PPfdi") == kernel_params(cubin, "scaled")
    assert kernel_params(cubin, "bare") == []
    assert kernel_params(cubin, "absent") is None
    assert kernel_params(b"not an ELF file", "scaled") is None


def test_a_mismatch_names_both_lists_and_a_workspace_may_follow(cubin: bytes) -> None:
    assert params_mismatch(cubin, ParamsCheck("scaled", ("PPfdi",))) is None
    assert params_mismatch(cubin, ParamsCheck("with_workspace", ("PPi", "PPiP"))) is None
    why = params_mismatch(cubin, ParamsCheck("scaled", ("PPii", "PPiiP")))
    assert why is not None
    assert "kernel scaled declares 5 parameter(s)" in why
    assert "the signature passes 4: pointer, pointer, int32, int32" in why
    assert "8 B at 24" in why  # the double the signature does not pass
    # nothing is claimed about a kernel the cubin does not hold
    assert params_mismatch(cubin, ParamsCheck("absent", ("P",))) is None


def _representatives(name: str) -> list[Any]:
    """The points whose kernels differ in structure: the baseline, every shape's campaign best
    of the shipped replay datasets, and the variants the family's own tests build."""
    family = get_family(name)
    points = [family.baseline]
    for path in family.replay_datasets():
        fastest: dict[str, dict[str, Any]] = {}
        for (_, shape), row in ReplayDataset(path, family).points.items():
            if row["status"] == "ok" and row.get("perf") and (
                    shape not in fastest
                    or row["perf"]["avg_us"] < fastest[shape]["perf"]["avg_us"]):
                fastest[shape] = row
        points += [family.params_from_dict(row["params"]) for row in fastest.values()]
    if name == "gemm_bias_relu":
        points += [*bf16_variants()[:4], *stream_k_variants()[:4]]
    else:
        points += list(BULK_PICKS.values())
    return list(dict.fromkeys(points))


@pytest.mark.parametrize("name", ["gemm_bias_relu", "softmax"])
def test_every_kind_of_builtin_kernel_takes_its_signatures_parameters(
        name: str, compiler: Compiler) -> None:
    family = get_family(name)
    points = [p for p in _representatives(name) if family.validate(p, compiler.arch) is None]
    assert len(points) >= 8
    checks = [candidate_params(family, p) for p in points]
    jobs = [compiler.submit(family.render(p), entry=family.name,
                            dynamic_smem_bytes=int(family.dynamic_smem_bytes(p)),
                            arch=family.compile_arch(p, compiler.arch), params=check)
            for p, check in zip(points, checks, strict=True)]
    for point, check, job in zip(points, checks, jobs, strict=True):
        assert check is not None, point
        result = job.result()
        assert result.status == "ok", (point, result.error)
        # the check ran: the cubin holds the kernel's parameter records
        assert kernel_params(result.cubin(), check.kernel) is not None
    reference = compiler.compile(family.reference_source(), params=reference_params(family))
    assert reference.status == "ok", reference.error


def test_a_user_kernel_with_other_parameters_is_a_compile_error(compiler: Compiler) -> None:
    spec = load_spec_dir(EXAMPLE)
    fam = build_family(spec)
    good = compile_candidate(compiler, fam, fam.baseline)
    assert good.status == "ok", good.error
    assert compiler.compile(fam.reference_source(), params=reference_params(fam)).status == "ok"
    # the signature ends with int32 m, int32 n; a kernel that takes n as a 64-bit size reads
    # its upper half from past the parameters the launch packs
    bad = copy.deepcopy(spec)
    bad["name"] = "transpose_wide_n"
    bad["files"]["transpose.cu"] = spec["files"]["transpose.cu"].replace(
        "float* __restrict__ out, int m, int n)", "float* __restrict__ out, int m, long long n)")
    assert bad["files"]["transpose.cu"] != spec["files"]["transpose.cu"]
    short = build_family(bad)
    result = compile_candidate(compiler, short, short.baseline)
    assert result.status == "error"
    assert result.failure_status == "compile_error"
    assert result.error is not None
    assert "kernel transpose declares 4 parameter(s)" in result.error
    assert "8 B at 24" in result.error
    assert "the signature passes 4: pointer, pointer, int32, int32" in result.error
    assert result.cubin_path is None
    # the compile itself stays cached: the same source with a right list is fine
    assert compiler.compile(short.render(short.baseline), entry=short.name).status == "ok"


def test_the_check_is_the_signatures_format_and_an_optional_workspace() -> None:
    family = get_family("gemm_bias_relu")
    check = candidate_params(family, family.baseline)
    assert check == ParamsCheck("gemm_bias_relu", ("PPPPiii", "PPPPiiiP"))
    assert family.default_dims == Dims({"m": 4096, "n": 4096, "k": 4096})
