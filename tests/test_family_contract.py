"""Every kernel family passes one contract: declarations that hold together, deterministic
rendering that nvcc compiles, validity and launch for random dimensions, a reference that
compiles — the built-in families, one defined only under ``tests/`` (registered at run time,
and found through the ``tuneforge.families`` entry-point group), and the declarative example
``examples/transpose`` (a spec directory, no Python)."""

from __future__ import annotations

import importlib
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kernels
from kernels import family_names, get_family, register_family, unregister_family
from kernels.base import Candidate, Dims, LaunchConfig, Rejection
from kernels.family import DTYPES, FILL_KINDS, KernelFamily, describe
from kernels.userspec import build_family, load_spec_dir
from worker.compile import Compiler, candidate_params, reference_params

sys.path.insert(0, str(Path(__file__).resolve().parent))
from families.scale_add import FAMILY as SCALE_ADD  # noqa: E402
from repo import ROOT

#: A user family built from its spec directory.
TRANSPOSE = build_family(load_spec_dir(ROOT / "examples"
                                       / "transpose"))

#: The GPU's limits a launch must respect.
MAX_THREADS = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)


@pytest.fixture(scope="module", autouse=True)
def _test_family() -> Iterator[None]:
    register_family(SCALE_ADD, replace=True)
    register_family(TRANSPOSE, replace=True)
    yield
    unregister_family(SCALE_ADD.name)
    unregister_family(TRANSPOSE.name)


def all_families() -> list[str]:
    return [*kernels.BUILTIN, SCALE_ADD.name, TRANSPOSE.name]


def small_dims(family: KernelFamily, draw: Any) -> Dims:
    """Dimensions within the family's bounds, small enough to keep a launch cheap."""
    values = {}
    for dim in family.dims:
        values[dim.name] = draw(st.integers(dim.lo, min(dim.hi, 5000)))
    return family.make_dims(values)


@pytest.mark.parametrize("name", all_families())
def test_declarations_hold_together(name: str) -> None:
    family = get_family(name)
    assert isinstance(family, KernelFamily)
    assert family.name == name
    names = {d.name for d in family.dims}
    assert family.signature.names() <= names, "the signature reads only the dimensions"
    assert family.signature.outputs
    assert family.signature.inputs
    assert all(b.dtype in DTYPES for b in family.signature.buffers)
    assert family.default_dims == family.make_dims(family.default_dims.as_dict())
    assert family.parse_dims(str(family.default_dims)) == family.default_dims
    named = ",".join(f"{k}={v}" for k, v in family.default_dims.items())
    assert family.parse_dims(named) == family.default_dims
    assert family.metric.amount(family.default_dims) > 0
    assert family.metric.unit in ("TFLOP/s", "GB/s")
    assert family.distributions, "at least one input distribution"
    for dist in family.distributions:
        assert all(f["kind"] in FILL_KINDS for f in dist.resolve(family.signature))
    for edge in family.edge_shapes:
        assert family.make_dims(edge.as_dict()) == edge
    if family.vendor is not None:
        module = importlib.import_module(family.vendor.module)
        assert callable(module.prepare)
    assert family.validate(family.baseline) is None
    about = describe(family)
    assert about["name"] == name
    assert about["transforms"] == family.transforms.names()
    for dataset in family.replay_datasets():
        assert Path(str(dataset)).exists()


@pytest.mark.parametrize("name", all_families())
def test_bad_shapes_are_refused_naming_the_dimension(name: str) -> None:
    family = get_family(name)
    first = family.dims[0]
    with pytest.raises(ValueError, match=f"shape.{first.name} must be"):
        family.make_dims({**family.default_dims.as_dict(), first.name: 0})
    with pytest.raises(ValueError, match="unknown dimension"):
        family.make_dims({**family.default_dims.as_dict(), "zz": 1})
    with pytest.raises(ValueError, match="shape must look like"):
        family.parse_dims("one by two")


@pytest.mark.parametrize("name", all_families())
def test_rendering_is_deterministic_and_every_transform_answers(name: str) -> None:
    family = get_family(name)
    base = Candidate(family.baseline)
    assert family.render(family.baseline) == family.render(family.baseline)
    assert family.source_hash(family.baseline) == family.source_hash(family.baseline)
    for spec in family.transforms:
        for action in spec.actions():
            result = family.apply(base, action)
            if isinstance(result, Rejection):
                assert result.reason
                assert result.message
            else:
                assert result.action == action
                assert result.parent is base
                rejection = family.validate(result.params)
                assert rejection is None or rejection.reason


@pytest.mark.parametrize("name", all_families())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_points_launch_at_any_shape_or_say_why(name: str, data: st.DataObject) -> None:
    family = get_family(name)
    seed = data.draw(st.integers(0, 2**31 - 1))
    [params] = family.sample(random.Random(seed), 1)
    dims = small_dims(family, data.draw)
    resolved = family.signature.resolve(dims)
    assert all(b["count"] >= 1 for b in resolved["buffers"])
    launch = family.launch(params, dims)
    if isinstance(launch, Rejection):
        assert launch.reason
        assert launch.message
        return
    assert isinstance(launch, LaunchConfig)
    threads = launch.block[0] * launch.block[1] * launch.block[2]
    assert 1 <= threads <= MAX_THREADS
    assert all(1 <= g <= top for g, top in zip(launch.grid, MAX_GRID, strict=True))
    assert launch.dynamic_smem_bytes >= 0
    if launch.epilogue is not None:
        names = {b.name for b in family.signature.buffers} | \
            {s.name for s in family.signature.scalars} | {"workspace"}
        assert all(isinstance(a, int) or a in names for a in launch.epilogue.args)
    ref = family.reference_launch(dims)
    assert all(g >= 1 for g in ref.grid)


@pytest.mark.parametrize("name", all_families())
def test_baseline_samples_and_reference_compile_with_nvcc(name: str, compiler: Compiler) -> None:
    family = get_family(name)
    points = [family.baseline, *family.sample(random.Random(7), 3)]
    # with the kernel's parameters held against the signature's (worker.cubin_params)
    jobs = [compiler.submit(family.render(p), entry=family.name,
                            dynamic_smem_bytes=family.dynamic_smem_bytes(p),
                            arch=family.compile_arch(p, compiler.arch),
                            params=candidate_params(family, p))
            for p in points if family.validate(p, compiler.arch) is None]
    for job in jobs:
        result = job.result()
        assert result.status == "ok", result.error
    reference = compiler.compile(family.reference_source(), params=reference_params(family))
    assert reference.status == "ok", reference.error


def test_the_registry_names_its_families_and_refuses_unknown_ones() -> None:
    assert set(kernels.BUILTIN) <= set(family_names())
    assert SCALE_ADD.name in family_names()
    with pytest.raises(ValueError, match="unknown kernel family 'conv2d'; known: "):
        get_family("conv2d")
    with pytest.raises(ValueError, match="already registered"):
        register_family(SCALE_ADD)
    with pytest.raises(TypeError, match="is not a kernel family"):
        register_family(object())


def test_an_installed_package_joins_through_the_entry_point_group(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A distribution on sys.path that declares ``[tuneforge.families]`` is found by name."""
    package = tmp_path / "acme_kernels"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from dataclasses import replace\n"
        "import families.scale_add as base\n"
        "class Acme(base.ScaleAdd):\n"
        "    name = 'acme_scale'\n"
        "FAMILY = Acme()\n")
    info = tmp_path / "acme_kernels-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-kernels\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[tuneforge.families]\nacme_scale = acme_kernels\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert "acme_scale" in family_names()
    family = get_family("acme_scale")
    assert family.name == "acme_scale"
    assert "scale_add" in family.render(family.baseline)
    kernels._loaded.pop("acme_scale", None)


def test_what_the_resolvers_find_is_kept_for_the_most_recent_names_only() -> None:
    """A long-lived process meets many versions of a team's families through its resolver:
    it keeps the :data:`kernels.MAX_RESOLVED` most recently used and asks again for one that
    dropped out."""
    spec = load_spec_dir(ROOT / "examples" / "transpose")
    built = [build_family({**spec, "name": f"lru_probe_{i}"})
             for i in range(kernels.MAX_RESOLVED + 6)]
    by_name = {family.name: family for family in built}  # name@content-hash, as stored
    names = list(by_name)
    asked: list[str] = []

    def resolver(name: str) -> Any:
        if name not in by_name:
            return None
        asked.append(name)
        return by_name[name]

    kernels.add_resolver(resolver)
    try:
        for name in names:
            assert get_family(name).name == name
        assert get_family(names[-1]).name == names[-1]  # kept: not asked again
        assert asked == names
        assert len(kernels._found) == kernels.MAX_RESOLVED
        assert names[0] not in kernels._found
        assert get_family(names[0]).name == names[0]  # dropped out: asked again
        assert asked[-1] == names[0]
    finally:
        kernels.remove_resolver(resolver)
        for name in [n for n in kernels._found if n.startswith("lru_probe_")]:
            kernels._found.pop(name)
