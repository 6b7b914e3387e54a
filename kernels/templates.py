"""The Jinja2 environment a family's CUDA templates render in: strict (an undefined name is an
error, not an empty string), whitespace-stable (same parameters, same bytes), no escaping, and
templates read from the family's own package only."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import jinja2


@lru_cache(maxsize=16)
def package_environment(package: str) -> jinja2.Environment:
    """The environment of the templates (and the files they include) of ``package``."""
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(
            lambda name: resources.files(package).joinpath(name).read_text()),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True, autoescape=False,
    )
