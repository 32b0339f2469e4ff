"""Every decomposition result shares one base: TensorLy's unpacking, the report as
attributes, to_dict() of plain values, one repr, and pickling."""

import pickle

import numpy as np
import pytest

import tenfold
from tenfold._results import _Result


def _results():
    rng = np.random.default_rng(0)
    x = rng.random((8, 7, 6))
    counts = rng.poisson(2.0, (8, 7, 6)).astype(float)
    coords = np.array(np.nonzero(counts))
    return {
        "parafac": tenfold.parafac(x, 2),
        "sparse parafac": tenfold.parafac((coords, counts[counts != 0], counts.shape), 2),
        "cp_apr": tenfold.cp_apr(counts, 2, random_state=1),
        "gcp": tenfold.gcp(x, 2, random_state=1),
        "tucker": tenfold.tucker(x, rank=[3, 2, 2]),
    }


RESULTS = _results()


@pytest.mark.parametrize("name", RESULTS)
def test_one_base_and_tensorlys_unpacking(name):
    r = RESULTS[name]
    assert isinstance(r, _Result) and len(r) == 2
    first, factors = r
    assert factors is r.factors and r.shape == (8, 7, 6)
    if name == "tucker":
        assert first is r.core and r.rank == (3, 2, 2)
    else:
        assert first is r.weights and r.rank == 2


def test_gcp_is_no_cp_apr_result():
    assert not isinstance(RESULTS["gcp"], type(RESULTS["cp_apr"]))


@pytest.mark.parametrize("name", RESULTS)
def test_to_dict_holds_the_parts_and_the_report(name):
    r = RESULTS[name]
    d = r.to_dict()
    assert list(d)[:2] == (["core", "factors"] if name == "tucker" else ["weights", "factors"])
    assert d["iterations"] == r.iterations and d["converged"] == r.converged
    d["factors"].clear()
    assert len(r.factors) == 3  # a copy of the containers

    def plain(v):
        if isinstance(v, (list, tuple)):
            return all(plain(e) for e in v)
        if isinstance(v, dict):
            return all(isinstance(k, str) and plain(e) for k, e in v.items())
        return isinstance(v, (bool, int, float, str, np.ndarray))

    assert plain(d)


@pytest.mark.parametrize("name", RESULTS)
def test_uniform_repr_and_pickling(name):
    r = RESULTS[name]
    text = repr(r)
    assert text.startswith(f"{type(r).__name__}(shape=(8, 7, 6), rank={r.rank}, ")
    back = pickle.loads(pickle.dumps(r))
    assert type(back) is type(r) and repr(back) == text and back.to_dict().keys() == r.to_dict().keys()
