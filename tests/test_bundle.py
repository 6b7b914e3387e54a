"""The export bundle (``agent/bundle.py``): its dispatch table from real entries (the replay
datasets' best points), its cubins from the real nvcc, its C++ header and the C++ example built
with nvcc against it, and the entries it refuses."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from bundle_support import build, transpose_entries, transpose_family
from repo import ROOT

from agent.bundle import BundleEntry, BundleError, replay_entries, write_bundle
from core.replay import ReplayDataset
from kernels import get_family
from kernels.base import Dims
from worker.compile import Compiler

DEMO = ROOT / "examples" / "library" / "softmax_demo.cu"
#: a persistent launch with a group of 16 CTAs, a non-portable cluster of 16, a plain one
SOFTMAX_SHAPES = ("16x262144", "256x262144", "65536x128")

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


@pytest.fixture(scope="module")
def bundles(compiler: Compiler, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Softmax at three of its replay shapes, the GEMM at its replay shape (a prologue, a
    workspace, shared memory past 48 KB), the transpose user family at two shapes."""
    root = tmp_path_factory.mktemp("bundles")
    transpose = transpose_family()
    return {
        "softmax": build(compiler, root / "softmax", get_family("softmax"), SOFTMAX_SHAPES),
        "gemm_bias_relu": build(compiler, root / "gemm", get_family("gemm_bias_relu")),
        "transpose": build(compiler, root / "transpose", transpose, (),
                           transpose_entries(transpose, [(64, 96), (1000, 3)])),
    }


def dispatch(bundle: Path) -> dict[str, Any]:
    return json.loads((bundle / "dispatch.json").read_text())


def test_dispatch_table_holds_the_replay_best_points(bundles: dict[str, Path]) -> None:
    family = get_family("softmax")
    data = dispatch(bundles["softmax"])
    replay = ReplayDataset(family.replay_datasets()[0], family)
    assert data["format"] == "tuneforge-bundle"
    assert data["version"] == 1
    assert data["gpu"] == {"name": "NVIDIA H200", "arch": "sm_90", "sm_count": 132}
    assert data["fallback"] == "vendor"
    assert data["vendor"]["op"] == "softmax_last_dim"
    assert [d["name"] for d in data["family"]["dims"]] == ["rows", "cols"]
    assert data["family"]["signature"]["buffers"][0]["shape"] == ["rows", "cols"]
    assert sorted("x".join(map(str, e["shape"].values())) for e in data["entries"]) == \
        sorted(SOFTMAX_SHAPES)
    for entry in data["entries"]:
        shape = family.make_dims(entry["shape"])
        best = replay.best(shape)
        assert best is not None
        point = data["points"][entry["point"]]
        params = family.params_from_dict(point["params"])
        assert params == family.params_from_dict(best["params"])
        assert entry["measured_us"] == best["perf"]["avg_us"]
        assert entry["vendor_us"] == replay.meta["vendor_us"][str(shape)]
        assert entry["measured_at_shape"] is True
        assert entry["source"] == "tuned"
        assert entry["launch"] == family.launch(params, shape, sm_count=132).to_dict()
        assert entry["provenance"]["commit"]
        assert point["provenance"] == entry["provenance"]
    launches = {"x".join(map(str, e["shape"].values())): e["launch"] for e in data["entries"]}
    assert launches["16x262144"]["persistent"] is True
    assert launches["16x262144"]["group"] == 16
    assert launches["256x262144"]["cluster_size"] == 16


def test_every_point_has_a_cubin_holding_its_kernels(bundles: dict[str, Path]) -> None:
    for bundle in bundles.values():
        data = dispatch(bundle)
        assert len(list((bundle / "cubins").glob("*.cubin"))) == len(data["points"]) + 1
        for point in data["points"].values():
            image = (bundle / point["cubin"]).read_bytes()
            assert image[:4] == b"\x7fELF"
            for name in point["kernel_names"]:
                assert name.encode() + b"\0" in image
        reference = (bundle / data["reference"]["cubin"]).read_bytes()
        assert data["reference"]["kernel_name"].encode() + b"\0" in reference


def test_gemm_entry_keeps_its_prologue_and_workspace(bundles: dict[str, Path]) -> None:
    data = dispatch(bundles["gemm_bias_relu"])
    assert data["vendor"]["op"] == "addmm_bias_relu"
    (entry,) = data["entries"]
    launch = entry["launch"]
    assert launch["workspace_bytes"] > 0
    assert launch["dynamic_smem_bytes"] > 48 * 1024
    assert launch["prologue"]["args"] == ["A", "B", "workspace", "M", "N", "K"]
    point = data["points"][entry["point"]]
    assert point["arch"] == "sm_90a"
    assert point["kernel_names"] == [launch["prologue"]["kernel_name"], launch["kernel_name"]]
    shapes = {b["name"]: b["shape"] for b in data["family"]["signature"]["buffers"]}
    assert shapes == {"A": ["m", "k"], "B": ["k", "n"], "bias": ["n"], "C": ["m", "n"]}


def test_user_family_falls_back_to_its_reference_kernel(bundles: dict[str, Path]) -> None:
    data = dispatch(bundles["transpose"])
    assert data["family"]["display_name"] == "transpose"
    assert data["vendor"] is None
    assert data["fallback"] == "reference"
    assert data["reference"]["style"] == "same_signature"
    assert data["reference"]["launch"]["grid"][0] == "min(ceil_div(m * n, 256), 65536)"
    assert len(data["points"]) == 1  # one point at both shapes: one cubin


#: prints a header's table as one JSON line per entry (host code only: no GPU, no driver)
TABLE_DUMP = r"""
template <typename Table>
static void dump(const char* family) {
  for (int e = 0; e < Table::count; ++e) {
    const tuneforge::Entry& x = Table::entries[e];
    std::printf("{\"family\": \"%s\", \"dims\": [", family);
    for (int d = 0; d < Table::dims; ++d) std::printf("%s%lld", d ? ", " : "", x.dims[d]);
    std::printf("], \"point\": \"%s\", \"prologue\": ", Table::points[x.point].id);
    step(x.prologue); std::printf(", \"main\": "); step(x.main);
    std::printf(", \"epilogue\": "); step(x.epilogue);
    std::printf(", \"workspace\": %llu, \"cluster\": %d, \"persistent\": %s, \"group\": %d, "
                "\"scalars\": [", x.workspace_bytes, x.cluster_size,
                x.persistent ? "true" : "false", x.group);
    for (int s = 0; s < Table::scalars; ++s) std::printf("%s%lld", s ? ", " : "", x.scalars[s].i);
    std::printf("], \"measured_us\": %.17g}\n", x.measured_us);
  }
}
"""
STEP_DUMP = r"""
#include <cstdio>
static void step(const tuneforge::Step& s) {
  if (!s.kernel) { std::printf("null"); return; }
  std::printf("{\"kernel\": \"%s\", \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], "
              "\"smem\": %u, \"args\": [", s.kernel, s.grid[0], s.grid[1], s.grid[2],
              s.block[0], s.block[1], s.block[2], s.smem);
  for (int a = 0; a < s.nargs; ++a)
    std::printf("%s[%d, %d, %lld]", a ? ", " : "", static_cast<int>(s.args[a].kind),
                s.args[a].index, s.args[a].literal);
  std::printf("]}");
}
"""
KIND = {"buffer": 1, "scalar": 2, "workspace": 3, "literal": 4}


def expected_args(data: dict[str, Any], step: dict[str, Any], main: bool) -> list[list[int]]:
    sig = data["family"]["signature"]
    buffers = [b["name"] for b in sig["buffers"]]
    scalars = [s["name"] for s in sig["scalars"]]
    if main:
        out = [[KIND["buffer"], i, 0] for i in range(len(buffers))]
        out += [[KIND["scalar"], i, 0] for i in range(len(scalars))]
        return out + ([[KIND["workspace"], 0, 0]] if step.get("workspace_bytes") else [])
    return [[KIND["literal"], 0, a] if isinstance(a, int) else [KIND["workspace"], 0, 0]
            if a == "workspace" else [KIND["buffer"], buffers.index(a), 0] if a in buffers
            else [KIND["scalar"], scalars.index(a), 0] for a in step["args"]]


def dump_tables(bundles: dict[str, Path], tmp_path: Path) -> list[dict[str, Any]]:
    """Every bundle's header included in one C++ program (the launcher defined once), built
    with nvcc, run: the rows of their tables."""
    parts = [f'#include "{b / "tuneforge_dispatch.h"}"' for b in bundles.values()] + [STEP_DUMP]
    parts.append(TABLE_DUMP)
    calls = []
    for bundle in bundles.values():
        ns = f"tuneforge_{dispatch(bundle)['family']['display_name']}"
        parts.append(f"struct {ns}_table {{ static constexpr int count = {ns}::kEntryCount; "
                     f"static constexpr int dims = {ns}::kDims; "
                     f"static constexpr int scalars = {ns}::kScalars; "
                     f"static constexpr const tuneforge::Entry* entries = {ns}::kEntries; "
                     f"static constexpr const tuneforge::Point* points = {ns}::kPoints; }};")
        calls.append(f'dump<{ns}_table>("{ns}");')
    parts.append("int main() { " + " ".join(calls) + " }")
    source = tmp_path / "dump.cpp"
    source.write_text("\n".join(parts))
    exe = tmp_path / "dump"
    done = subprocess.run(["nvcc", "-std=c++17", str(source), "-o", str(exe)],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=30)
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_header_tables_are_the_dispatch_tables(bundles: dict[str, Path], tmp_path: Path
                                               ) -> None:
    rows = dump_tables(bundles, tmp_path)
    for bundle in bundles.values():
        data = dispatch(bundle)
        ns = f"tuneforge_{data['family']['display_name']}"
        mine = [r for r in rows if r["family"] == ns]
        check_table(data, mine)


def check_table(data: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    assert len(rows) == len(data["entries"])
    for row, entry in zip(rows, data["entries"], strict=True):
        launch = entry["launch"]
        assert row["dims"] == list(entry["shape"].values())
        assert row["point"] == entry["point"]
        assert row["main"]["kernel"] == launch["kernel_name"]
        assert row["main"]["grid"] == launch["grid"]
        assert row["main"]["block"] == launch["block"]
        assert row["main"]["smem"] == launch["dynamic_smem_bytes"]
        assert row["main"]["args"] == expected_args(data, launch, main=True)
        for side in ("prologue", "epilogue"):
            if launch.get(side):
                assert row[side]["kernel"] == launch[side]["kernel_name"]
                assert row[side]["grid"] == launch[side]["grid"]
                assert row[side]["args"] == expected_args(data, launch[side], main=False)
            else:
                assert row[side] is None
        assert row["workspace"] == launch["workspace_bytes"]
        assert row["cluster"] == launch.get("cluster_size", 1)
        assert row["persistent"] == launch.get("persistent", False)
        assert row["group"] == launch.get("group", 1)
        assert row["scalars"] == [entry["shape"][s["value"]] if s["value"] in entry["shape"]
                                  else None for s in data["family"]["signature"]["scalars"]]
        assert row["measured_us"] == (entry["measured_us"] if entry["measured_us"] is not None
                                      else -1.0)


def stub_libcuda(obj: Path, where: Path) -> Path:
    """A ``libcuda.so`` whose every driver function the object calls answers 999 (this
    machine has no driver to link against)."""
    names = [line.split()[-1] for line in subprocess.run(
        ["nm", "-u", str(obj)], check=True, capture_output=True, text=True).stdout.splitlines()
        if line.split()[-1].startswith("cu")]
    stub = where / "stub.c"
    stub.write_text("".join(f"int {n}(void) {{ return 999; }}\n" for n in names))
    subprocess.run(["cc", "-shared", "-fPIC", str(stub), "-o", str(where / "libcuda.so")],
                   check=True, capture_output=True)
    return where


def test_cpp_example_builds_with_nvcc_against_the_header(bundles: dict[str, Path],
                                                         tmp_path: Path) -> None:
    obj = tmp_path / "softmax_demo.o"
    done = subprocess.run(
        ["nvcc", "-std=c++17", "-O2", "-Xcompiler", "-Wall,-Wextra,-Werror",
         "-I", str(bundles["softmax"]), "-c", str(DEMO), "-o", str(obj)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    libdir = stub_libcuda(obj, tmp_path)
    exe = tmp_path / "softmax_demo"
    subprocess.run(["nvcc", str(obj), "-o", str(exe), "-L", str(libdir), "-lcuda"],
                   check=True, capture_output=True, timeout=120)
    # linked against the stub, the demo stops at its first driver call with the error
    run = subprocess.run([str(exe), str(bundles["softmax"])], capture_output=True, text=True,
                         timeout=30, env={"LD_LIBRARY_PATH": str(libdir)})
    assert run.returncode == 1
    assert "cuInit failed" in run.stderr


def test_bundle_readme_says_how_to_call_it(bundles: dict[str, Path]) -> None:
    text = (bundles["gemm_bias_relu"] / "README.md").read_text()
    assert "C = lib.gemm_bias_relu(A, B, bias)" in text
    assert "tuneforge_gemm_bias_relu::Library" in text
    assert "vendor operator" in text


def test_bundle_refuses_bad_entries(compiler: Compiler, tmp_path: Path) -> None:
    family = get_family("gemm_bias_relu")
    (best,) = replay_entries(family)

    def refused(entries: list[BundleEntry], out: Path | None = None) -> str:
        with pytest.raises(BundleError) as info:
            write_bundle(out or tmp_path / "b", family, entries, compiler=compiler,
                         arch="sm_90", sm_count=132, gpu_name="NVIDIA H200", provenance={})
        return str(info.value)

    assert "two entries" in refused([best, best])
    assert "must be in [1, 65536]" in refused([replace(best, shape=Dims(m=65537, n=4, k=4))])
    fixed = replace(best.params, shape_m=4096, shape_n=4096, shape_k=4096)
    assert "compiled for 4096x4096x4096 only" in refused(
        [replace(best, shape=Dims(m=64, n=64, k=64), params=fixed)])
    assert "source 'guess'" in refused([replace(best, source="guess")])
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    assert "not empty" in refused([best], tmp_path / "full")
    assert not (tmp_path / "b").exists()


def test_an_entrys_near_ties_go_with_it(compiler: Compiler, tmp_path: Path) -> None:
    """A tuned entry's near-ties: each distinct point that launches at the shape is carried
    (its cubin, its launch there, its time and provenance); the entry's own point given
    again, a repeat, and a point compiled for another shape are left out, with no error."""
    family = get_family("softmax")
    replay = ReplayDataset(family.replay_datasets()[0], family)
    shape = family.parse_dims("65536x128")
    ranked = replay.ranked(shape)
    (best,) = [e for e in replay_entries(family) if e.shape == shape]
    second = family.params_from_dict(ranked[1]["params"])
    origin = {"campaign_id": "c" * 32, "candidate_id": "d" * 32}
    us = ranked[1]["perf"]["avg_us"]
    entry = replace(best, alternates=[(best.params, best.measured_us, {}), (second, us, origin),
                                      (second, us, origin)])
    gemm = get_family("gemm_bias_relu")
    (gemm_best,) = replay_entries(gemm)
    fixed = replace(gemm_best.params, shape_m=64, shape_n=64, shape_k=64)
    out = build(compiler, tmp_path / "softmax", family, (), [entry])
    other = build(compiler, tmp_path / "gemm", gemm, (),
                  [replace(gemm_best, alternates=[(fixed, 1.0, {})])])
    data = dispatch(out)
    (written,) = data["entries"]
    (alt,) = written["alternates"]
    assert alt["point"] != written["point"]
    assert alt["measured_us"] == us
    assert alt["launch"] == family.launch(second, shape, sm_count=132).to_dict()
    point = data["points"][alt["point"]]
    assert family.params_from_dict(point["params"]) == second
    assert point["provenance"] == origin
    assert (out / point["cubin"]).read_bytes()[:4] == b"\x7fELF"
    assert len(data["points"]) == 2
    (gemm_entry,) = dispatch(other)["entries"]
    assert gemm_entry["alternates"] == []
    assert len(dispatch(other)["points"]) == 1
