"""Shared pytest set-up for the kiln package: a compile cache of its own (warm across runs), seeded
random inputs, and markers for the tests that need torch or the kiln CLI."""
import os
import pathlib

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
os.environ.setdefault("KILN_CACHE_DIR", str(REPO / "build-python" / "pytest-kiln-cache"))


def kiln_cli():
    """The C++ CLI built by scripts/build (to prove artefacts load without Python), or None."""
    path = os.environ.get("KILN_BIN") or str(REPO / "build" / "kiln")
    return path if os.path.exists(path) else None


@pytest.fixture
def rng():
    return np.random.default_rng(20261204)


def random_array(rng, shape, dtype="float32", lo=-2.0, hi=2.0):
    """Random values (never constant) of a dtype."""
    if np.dtype(dtype).kind == "f":
        return rng.uniform(lo, hi, shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(int(lo) - 3, int(hi) + 4, shape).astype(dtype)
