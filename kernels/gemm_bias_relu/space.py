"""The GEMM's space: its kernel paths, the seed's and the replay's sub-spaces, enumeration and
uniform sampling of valid canonical points."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator, Mapping
from dataclasses import fields, replace
from typing import Any

from kernels.gemm_bias_relu.params import (
    DOMAINS,
    SEARCHED_WGMMA,
    WG_FIXED,
    WG_THREADS,
    GemmParams,
)
from kernels.gemm_bias_relu.validity import validate

#: The space the walk and the sampling cover by default: every domain, the wgmma N as searched
#: (:data:`~kernels.gemm_bias_relu.params.SEARCHED_WGMMA`).
SEARCH_DOMAINS: dict[str, tuple[Any, ...]] = {**DOMAINS, "wgmma": SEARCHED_WGMMA}

#: The sub-space measured for the replay dataset: closed enough under the transforms that a
#: campaign walking from the baseline meets measured points, small enough to measure in minutes.
REPLAY_DOMAINS: dict[str, tuple[Any, ...]] = {
    **DOMAINS,
    "block_x": (16, 32, 64),
    "block_y": (4, 8, 16),
    "tile_k": (8, 16, 32),
    "reg_m": (1, 4, 8),
    "reg_n": (1, 4, 8),
    "vec": (1, 4),
    "unroll": (1, 4),
    "pad": (0, 1),
    "interleave": (False,),
    "stages": (1,),
    "swizzle": (1,),
    "tf32x3": (False,),
    "warp_m": (32,),
    "warp_n": (32,),
    "split_k": (1,),
    "wgmma": (0,),
    "frag_global": (False,),
    "async_copy": (False,),
    "mma_window": (1,),
    "producers": (0,),
    "frag_prefetch": (False,),
    "lane_quads": (False,),
    "stream_k": (0,),
    "bf16_split": (0,),
    "split_pass": (False,),
    "split_on_demand": (False,),
    "mma_accumulate": (False,),
}


def in_replay_space(params: GemmParams) -> bool:
    """Whether a point belongs to the replay sub-space (staged tiles only with coalescing)."""
    return all(getattr(params, k) in v for k, v in REPLAY_DOMAINS.items()) and (
        params.coalesced or not params.smem
    ) and params.fixed_shape is None


#: The fields each kernel path reads; the others are fixed at their canonical values there.
PATH_FIELDS: dict[str, tuple[str, ...]] = {
    "direct": ("block_x", "block_y", "coalesced", "reg_m", "reg_n", "vec", "unroll", "swizzle"),
    "smem": ("block_x", "block_y", "coalesced", "reg_m", "reg_n", "vec", "unroll", "swizzle",
             "tile_k", "pad", "interleave", "stages", "split_k", "async_copy", "frag_prefetch",
             "lane_quads", "stream_k"),
    "tc": ("block_x", "block_y", "tile_k", "stages", "swizzle", "warp_m", "warp_n", "split_k"),
    "wgmma": ("block_y", "stages", "swizzle", "wgmma", "split_k", "frag_global", "mma_window",
              "producers", "bf16_split"),
}
_PATH_BASE: dict[str, dict[str, Any]] = {
    "direct": {"smem": False, "tf32x3": False},
    "smem": {"smem": True, "tf32x3": False},
    "tc": {"tf32x3": True},
    "wgmma": {"tf32x3": True, "block_x": WG_THREADS, **WG_FIXED},
}

#: The seed's space plus coalescing (no expert fields): small enough to enumerate whole.
SEED_DOMAINS: dict[str, tuple[Any, ...]] = {
    **DOMAINS, "interleave": (False,), "stages": (1,), "swizzle": (1,), "tf32x3": (False,),
    "split_k": (1,), "wgmma": (0,), "frag_global": (False,), "async_copy": (False,),
    "mma_window": (1,),
    "producers": (0,),
    # the seed's register blocking goes up to 8 x 8
    "reg_m": (1, 2, 4, 8), "reg_n": (1, 2, 4, 8), "frag_prefetch": (False,),
    "lane_quads": (False,),
    "stream_k": (0,),
    "bf16_split": (0,),
    "split_pass": (False,),
    "split_on_demand": (False,),
    "mma_accumulate": (False,),
}

#: Fields a path's points take beside :data:`PATH_FIELDS`, valid for few of its points (the
#: split pass and its clusters: bf16 kernels with one producer): enumerated as twins of the
#: points they fit and drawn from a hash of the other fields, so that adding them left the
#: path sizes, and the points a seed draws, as they were.
TWIN_FIELDS: dict[str, tuple[str, ...]] = {"wgmma": ("split_pass", "pass_cluster")}


def _twins(path: str, point: GemmParams, domains: Mapping[str, tuple[Any, ...]],
           arch: str) -> list[GemmParams]:
    """The valid points that differ from ``point`` in :data:`TWIN_FIELDS` only."""
    names = TWIN_FIELDS.get(path, ())
    if not names:  # the point alone: no twin
        return []
    out = []
    for values in itertools.product(*(domains[name] for name in names)):
        twin = replace(point, **dict(zip(names, values, strict=True))).canonical()
        if twin != point and validate(twin, arch) is None:
            out.append(twin)
    return out


def _path_size(path: str, domains: Mapping[str, tuple[Any, ...]]) -> int:
    size = 1
    for name in PATH_FIELDS[path]:
        size *= len(domains[name])
    values = {**_PATH_BASE[path]}
    if any(v not in domains[k] for k, v in values.items()):
        return 0
    return size


def enumerate_space(arch: str = "sm_90", domains: Mapping[str, tuple[Any, ...]] | None = None
                    ) -> Iterator[GemmParams]:
    """Every valid canonical point of ``domains`` (default the whole space), deterministic.

    Walks each kernel path over the fields it reads only, so every tuple is a distinct canonical
    point. The whole space holds about 45 million valid points (staged SIMT tiles dominate;
    estimated by sampling): use :func:`sample_space` to draw from it. With
    ``domains=REPLAY_DOMAINS`` only points of :func:`in_replay_space`.
    """
    replay = domains == REPLAY_DOMAINS
    domains = domains or SEARCH_DOMAINS
    base = GemmParams().canonical()
    for path, names in PATH_FIELDS.items():
        if not _path_size(path, domains):
            continue
        # the path's fixed fields over the baseline's, as keywords (``replace`` per point
        # would read every field of the baseline again)
        fixed = {**{f.name: getattr(base, f.name) for f in fields(base)}, **_PATH_BASE[path]}
        for values in itertools.product(*(domains[n] for n in names)):
            point = GemmParams(**{**fixed, **dict(zip(names, values, strict=True))}).canonical()
            if path == "wgmma" and not point.wgmma:
                continue  # that is a point of the mma.sync path, walked there
            if validate(point, arch) is not None:
                continue
            if replay and not in_replay_space(point):
                continue
            yield point
            yield from _twins(path, point, domains, arch)


def sample_space(rng: Any, n: int, arch: str = "sm_90",
                 domains: Mapping[str, tuple[Any, ...]] | None = None,
                 max_tries: int = 100_000) -> list[GemmParams]:
    """``n`` distinct valid points drawn uniformly from the space without enumerating it
    (a path chosen in proportion to its size, its fields uniformly, invalid draws rejected)."""
    domains = domains or SEARCH_DOMAINS
    paths = [p for p in PATH_FIELDS if _path_size(p, domains)]
    weights = [_path_size(p, domains) for p in paths]
    base = GemmParams().canonical()
    out: dict[GemmParams, None] = {}
    for _ in range(max_tries):
        if len(out) >= n:
            break
        path = rng.choices(paths, weights=weights)[0]
        values = {name: rng.choice(domains[name]) for name in PATH_FIELDS[path]}
        point = replace(base, **_PATH_BASE[path], **values).canonical()
        if path == "wgmma" and not point.wgmma:
            continue
        if validate(point, arch) is None:
            twins = _twins(path, point, domains, arch)
            if twins:  # the point or one of its twins, chosen by a hash of the point
                tie = random.Random(json.dumps(point.to_dict(), sort_keys=True))
                point = tie.choice([point, *twins])
            out[point] = None
    return list(out)
