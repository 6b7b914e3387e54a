"""Fixtures shared by every test file: an isolated TUNEFORGE_HOME, a session compiler, GPU skips."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import pytest

from core.settings import get_settings
from worker.compile import Compiler


@pytest.fixture(autouse=True)
def tuneforge_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test runs with its own TUNEFORGE_HOME and no other TUNEFORGE_* variable from the
    caller's environment, so nothing reads or writes ~/.tuneforge; subprocesses inherit it."""
    for name in list(os.environ):
        if name.startswith("TUNEFORGE_"):
            monkeypatch.delenv(name)
    home = tmp_path / "tuneforge-home"
    home.mkdir()
    monkeypatch.setenv("TUNEFORGE_HOME", str(home))
    get_settings.cache_clear()
    yield home
    get_settings.cache_clear()


@pytest.fixture(autouse=True)
def _family_lookups_of_this_test_only() -> Iterator[None]:
    """The databases ``core.families.install`` made known and the resolvers
    ``kernels.add_resolver`` added during a test are forgotten after it (those of the
    session's and module's fixtures stay). A process keeps both for its life: an xdist
    worker, running a hundred files, had collected the databases of every test before (files
    since deleted, Postgres databases since dropped), and every lookup of a family key that
    none holds tried each of them in turn."""
    families, kernels = sys.modules.get("core.families"), sys.modules.get("kernels")
    urls = list(families._urls) if families is not None else []
    resolvers = list(kernels._resolvers) if kernels is not None else []
    yield
    families, kernels = sys.modules.get("core.families"), sys.modules.get("kernels")
    if families is not None:
        with families._lock:
            families._urls[:] = urls
    if kernels is not None:
        kernels._resolvers[:] = resolvers


#: the files that take longest under the workers (docs/BENCHMARKS.md "Test suite"), collected
#: first so that the xdist workers (``--dist loadfile``, a file a worker, in collection order)
#: start them first and share out the short files after, instead of one worker finishing a long
#: file alone. ``tests/service/test_fault_injection.py`` is not among them: ``make workers`` runs
#: it beside the workers (Makefile ``SOLO``)
LONGEST_FIRST = (
    "tests/test_softmax_emulated.py",
    "tests/test_tune_cli.py",
    "tests/test_dashboard_browser.py",
    "tests/test_wgmma.py",
    "tests/service/test_service_reliability.py",
    "tests/test_expert_memory.py",
    "tests/service/test_fault_agent_report.py",
    "tests/test_family_contract.py",
    "tests/test_compile.py",
    "tests/test_settle.py",
    "tests/test_gemm_emulated.py",
)


def _under_xdist(config: pytest.Config) -> bool:
    """Whether this process collects for pytest-xdist: a worker (xdist clears a worker's
    ``numprocesses``; its ``workerinput`` says what it is), or a controller started with
    ``-n`` (which collects nothing itself)."""
    return hasattr(config, "workerinput") or bool(getattr(config.option, "numprocesses", None))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``-n``), collect the files of :data:`LONGEST_FIRST` first (their
    own order kept), and refuse items that share a node id: xdist schedules by node id and
    runs one of them only (schemathesis gives each API operation of
    ``tests/service/test_fuzz_api.py`` its test's id: 1 of 16 operations would run).
    ``make test`` runs that file on its own, without ``-n``."""
    if not _under_xdist(config):
        return
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
    seen: dict[str, int] = {}
    for item in items:
        seen[item.nodeid] = seen.get(item.nodeid, 0) + 1
    shared = sorted(nodeid for nodeid, count in seen.items() if count > 1)
    if shared:
        raise pytest.UsageError(
            f"{len(shared)} node id(s) stand for several tests, which xdist would run once: "
            f"{', '.join(shared)}; run them without -n (make test does)")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full", action="store_true", default=False,
        help="put every point of the nvcc sweeps through the compiler (make test-full); "
             "without it those tests compile a stratified sample (tests/sampling.py)")


@pytest.fixture(scope="session")
def full(request: pytest.FixtureRequest) -> bool:
    """Whether the run was asked for the whole nvcc sweeps (``--full``, ``make test-full``)."""
    return bool(request.config.getoption("full"))


@pytest.fixture(scope="session")
def compiler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Compiler]:
    """One nvcc pool and one on-disk cache for the whole session (skips without nvcc); the
    workers of an xdist run share the cache (its entries are written by atomic renames)."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        cache = tmp_path_factory.getbasetemp().parent / "nvcc-cache"
        cache.mkdir(exist_ok=True)
    else:
        cache = tmp_path_factory.mktemp("nvcc-cache")
    comp = Compiler(cache, workers=os.cpu_count() or 1)
    yield comp
    comp.close()


@lru_cache(maxsize=1)
def gpu_unavailable_reason() -> str | None:
    """Why GPU tests cannot run here, or ``None``. Probed in a child process so that the test
    process itself never initialises CUDA."""
    probe = (
        "import pycuda.driver as d\n"
        "d.init()\n"
        "n = d.Device.count()\n"
        "raise SystemExit(0 if n > 0 else 3)\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"GPU probe failed: {exc}"
    if done.returncode == 0:
        return None
    if done.returncode == 3:
        return "pycuda finds no CUDA device"
    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return f"pycuda unusable: {last}"


@pytest.fixture(scope="session")
def gpu() -> None:
    """Skips where GPU tests cannot run: asked for by a GPU module's own fixtures, which pytest
    sets up before the autouse check below, so that they build nothing (bundles, nvcc) first."""
    reason = gpu_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(autouse=True)
def _skip_gpu_tests_without_gpu(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("gpu") is None:
        return
    reason = gpu_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
