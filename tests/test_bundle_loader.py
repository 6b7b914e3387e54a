"""The exported bundle's Python loader on the CPU: its input checks (dtype, contiguity, device,
shape bounds, buffers that disagree), the fallback reported once per shape, the custom
operator's fake implementation, and that it imports nothing of tuneforge."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from bundle_support import build, import_loader, transpose_entries, transpose_family  # noqa: E402

from kernels import get_family  # noqa: E402
from worker.compile import Compiler  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
TUNED = (65536, 128)


@pytest.fixture(scope="module")
def bundles(compiler: Compiler, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("loader")
    transpose = transpose_family()
    return {
        "softmax": build(compiler, root / "softmax", get_family("softmax"),
                         ["x".join(map(str, TUNED))]),
        "gemm_bias_relu": build(compiler, root / "gemm", get_family("gemm_bias_relu")),
        "transpose": build(compiler, root / "transpose", transpose, (),
                           transpose_entries(transpose, [(64, 96)])),
    }


@pytest.fixture(scope="module")
def loader(bundles: dict[str, Path]) -> ModuleType:
    return import_loader(bundles["softmax"])


@pytest.fixture(scope="module")
def libs(bundles: dict[str, Path], loader: ModuleType) -> dict[str, Any]:
    return {name: loader.load(path) for name, path in bundles.items()}


def refused(loader: ModuleType, call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(loader.InputError) as info:
        call(*args, **kwargs)
    return str(info.value)


def test_wrong_dtype_is_refused_naming_the_argument(libs: dict[str, Any],
                                                     loader: ModuleType) -> None:
    x = torch.randn(*TUNED, dtype=torch.float64)
    assert refused(loader, libs["softmax"].softmax, x) == \
        "softmax: argument x has dtype torch.float64, expected torch.float32"
    a, b = torch.randn(8, 4), torch.randn(4, 6)
    message = refused(loader, libs["gemm_bias_relu"].gemm_bias_relu, a, b,
                      torch.zeros(6, dtype=torch.int32))
    assert "argument bias has dtype torch.int32" in message


def test_non_contiguous_input_is_refused(libs: dict[str, Any], loader: ModuleType) -> None:
    x = torch.randn(TUNED[1], TUNED[0]).t()
    assert "argument x is not contiguous" in refused(loader, libs["softmax"].softmax, x)


def test_cpu_tensor_is_refused_for_its_device(libs: dict[str, Any], loader: ModuleType) -> None:
    message = refused(loader, libs["softmax"].softmax, torch.randn(*TUNED))
    assert message == ("softmax: argument x is on cpu; the bundle's kernels run on CUDA "
                       "(sm_90)")
    a, b, bias = torch.randn(8, 4), torch.randn(4, 6), torch.randn(6)
    assert "argument A is on cpu" in refused(loader, libs["gemm_bias_relu"].gemm_bias_relu,
                                             a, b, bias)


def test_shapes_outside_the_family_bounds_are_refused(libs: dict[str, Any],
                                                      loader: ModuleType) -> None:
    softmax = libs["softmax"].softmax
    wide = torch.empty(1, (1 << 24) + 1, device="meta")
    assert refused(loader, softmax, wide) == \
        "softmax: cols=16777217 is outside the family's bounds [1, 16777216]"
    assert "rows=0 is outside" in refused(loader, softmax, torch.empty(0, 8, device="meta"))
    gemm = libs["gemm_bias_relu"].gemm_bias_relu
    big = torch.empty(65537, 2, device="meta")
    assert "m=65537 is outside the family's bounds [1, 65536]" in refused(
        loader, gemm, big, torch.empty(2, 3, device="meta"), torch.empty(3, device="meta"))


def test_buffers_that_disagree_are_refused(libs: dict[str, Any], loader: ModuleType) -> None:
    gemm = libs["gemm_bias_relu"].gemm_bias_relu
    a, b = torch.randn(8, 4), torch.randn(5, 6)
    assert refused(loader, gemm, a, b, torch.randn(6)) == \
        "gemm_bias_relu: argument B gives k=5, but an earlier argument gave k=4"
    assert "argument bias gives n=7" in refused(loader, gemm, a, torch.randn(4, 6),
                                                torch.randn(7))
    softmax = libs["softmax"].softmax
    assert "expected (rows, cols)" in refused(loader, softmax, torch.randn(2, 3, 4))
    assert "takes 1 tensor(s) (x), got 2" in refused(loader, softmax, torch.randn(2, 3),
                                                     torch.randn(2, 3))
    flat = torch.randn(24)
    assert "cannot tell rows, cols" in refused(loader, softmax, flat)
    assert "argument x has 24 elements, expected rows * cols = 25" in refused(
        loader, softmax, flat, rows=5, cols=5)
    assert "unknown argument 'axis'" in refused(loader, softmax, torch.randn(2, 3), axis=1)


def test_missing_entry_is_reported_once_per_shape(libs: dict[str, Any],
                                                  loader: ModuleType) -> None:
    softmax = libs["softmax"].softmax
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = softmax.lookup(torch.empty(1000, 77, device="meta"))
        again = softmax.lookup(torch.empty(1000, 77, device="meta"))
        other = softmax.lookup(torch.empty(3, 5, device="meta"))
        tuned = softmax.lookup(torch.empty(*TUNED, device="meta"))
    reports = [w for w in caught if issubclass(w.category, loader.FallbackWarning)]
    assert [str(w.message) for w in reports] == [
        "tuneforge_loader: softmax has no dispatch entry at rows=1000,cols=77; running the "
        "fallback: vendor torch.softmax",
        "tuneforge_loader: softmax has no dispatch entry at rows=3,cols=5; running the "
        "fallback: vendor torch.softmax"]
    assert first.entry is None
    assert again.runs == "vendor torch.softmax"
    assert other.entry is None
    assert tuned.entry is not None
    assert tuned.runs == f"point {tuned.entry['point']} (tuned)"


def test_user_family_falls_back_to_its_reference(libs: dict[str, Any],
                                                 loader: ModuleType) -> None:
    transpose = libs["transpose"].transpose
    with pytest.warns(loader.FallbackWarning, match="running the fallback: reference kernel"):
        found = transpose.lookup(torch.empty(7, 9, device="meta"))
    assert found.shape == {"m": 7, "n": 9}
    assert transpose.lookup(torch.empty(64 * 96, device="meta"), m=64, n=96).entry is not None


def test_custom_op_fake_gives_the_output_shape(libs: dict[str, Any]) -> None:
    """What ``torch.compile`` traces: the registered operator on meta tensors gives the
    output's shape and dtype without running anything."""
    gemm = libs["gemm_bias_relu"].gemm_bias_relu
    namespace, name = gemm.qualname.split("::")
    op = getattr(getattr(torch.ops, namespace), name)
    out = op(torch.empty(5, 3, device="meta"), torch.empty(3, 7, device="meta"),
             torch.empty(7, device="meta"))
    assert out.shape == (5, 7)
    assert out.dtype == torch.float32
    with pytest.raises(Exception, match="argument bias has dtype torch.float64"):
        op(torch.empty(5, 3, device="meta"), torch.empty(3, 7, device="meta"),
           torch.empty(7, device="meta", dtype=torch.float64))


def test_bad_bundle_is_refused(bundles: dict[str, Path], loader: ModuleType,
                               tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(bundles["softmax"], copy)
    data = json.loads((copy / "dispatch.json").read_text())
    data["version"] = 99
    (copy / "dispatch.json").write_text(json.dumps(data))
    with pytest.raises(loader.BundleError, match="version 99"):
        loader.load(copy)
    with pytest.raises(loader.BundleError, match="no dispatch.json"):
        loader.load(tmp_path)


def test_loader_imports_nothing_of_tuneforge(bundles: dict[str, Path]) -> None:
    """The bundle's loader runs where tuneforge is not installed: loaded in a fresh
    interpreter, it imports no tuneforge package."""
    probe = (
        "import sys\n"
        "import tuneforge_loader\n"
        "lib = tuneforge_loader.load()\n"
        "ours = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'kernels', 'core', 'worker', 'agent', 'api', 'cli', 'bench', 'jinja2'})\n"
        "print(repr(lib.softmax), ours)\n")
    bundle = bundles["softmax"]
    done = subprocess.run([sys.executable, "-c", probe], cwd=bundle, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(bundle),
                                                       "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("<tuneforge kernel softmax: 1 shapes, fallback vendor, "
                                   "NVIDIA H200 sm_90> []")
