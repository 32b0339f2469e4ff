"""Shared fixtures of the Python suite: the bundled data and the tenfold program."""

import os
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


@pytest.fixture(scope="session")
def covid():
    """The COVID-19 systems-serology tensor, 438 x 6 x 11 float64, C order."""
    return np.load(DATA / "COVID19_data.npy")


@pytest.fixture(scope="session")
def cli():
    """The tenfold program of the C++ build (scripts/test.sh sets TENFOLD_CLI)."""
    path = os.environ.get("TENFOLD_CLI")
    if not path:
        pytest.skip("TENFOLD_CLI is not set (scripts/test.sh sets it to the built program)")
    return path


def planted(shape, rank, seed, noise=0.0, dtype=np.float64):
    """A rank-`rank` tensor from random factors, with relative Gaussian noise."""
    rng = np.random.default_rng(seed)
    factors = [rng.standard_normal((n, rank)) for n in shape]
    letters = "abcdefgh"[: len(shape)]
    x = np.einsum(",".join(c + "r" for c in letters) + "->" + letters, *factors)
    if noise:
        e = rng.standard_normal(shape)
        x = x + noise * np.linalg.norm(x) / np.linalg.norm(e) * e
    return x.astype(dtype), factors
