"""scripts/numpy_coverage.py's table: every name has a sample, and every sample runs on NumPy.

One process, no MPI launch: the samples run on the NumPy inputs only (the
reference side of the table), and the verdict helpers run on hand-made results.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import numpy_coverage
import numpy_coverage_samples as table

pytestmark = pytest.mark.pure


def test_the_four_lists_have_their_lengths() -> None:
    """229 dask.array functions, 31 linalg, 18 fft and 53 ndarray names (331 in all)."""
    sizes = {group: len(names) for group, names in table.NAMES.items()}
    assert sizes == {"numpy": 229, "linalg": 31, "fft": 18, "method": 53}
    for names in table.NAMES.values():
        assert len(set(names)) == len(names)


@pytest.mark.parametrize("group", list(table.NAMES))
def test_every_name_has_a_sample(group: str) -> None:
    """Each name of the issue's lists has at least one sample, and no sample names another."""
    samples = table.GROUPS[group][1]
    assert [name for name in table.NAMES[group] if not samples.get(name)] == []
    assert sorted(set(samples) - set(table.NAMES[group])) == []


def test_every_sample_runs_on_numpy() -> None:
    """The reference side: each sample evaluates on the NumPy inputs without an error."""
    arrays = table.make_inputs()
    failures = []
    for group, name, code in table.samples():
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                inputs = {key: array.copy() for key, array in arrays.items()}
                table.evaluate(code, inputs, table.NumpyMaker())
        except Exception as exc:
            failures.append(f"{group}.{name}: {code}: {type(exc).__name__}: {exc}")
    assert failures == []


def test_samples_do_not_change_the_inputs() -> None:
    """A sample that writes works on a copy: the shared inputs stay as made."""
    arrays = table.make_inputs()
    table.evaluate("z = m.copy(); z.sort(axis=0); z", arrays, table.NumpyMaker())
    assert np.array_equal(arrays["m"], table.make_inputs()["m"])


def test_evaluate_returns_the_last_expression() -> None:
    """Statements run first; ``mk`` and ``shape:`` are understood."""
    inputs = {"v": np.arange(3.0)}
    assert table.evaluate("z = v * 2; z.sum()", inputs, table.NumpyMaker()) == 6.0
    made = table.evaluate("shape: mk.zeros((2, 3))", {}, table.NumpyMaker())
    assert made.shape == (2, 3)
    assert table.split_flags("shape: mk.empty(3)") == ("mk.empty(3)", True)


def test_compare_finds_each_kind_of_difference() -> None:
    """Equal results pass; shape, dtype, values and structure differences are named."""
    compare = numpy_coverage.compare
    a = np.linspace(0, 1, 5)
    assert compare(a, a + 1e-14) is None
    assert compare((a, 3), [a, np.int64(3)]) is None
    assert compare(np.array([np.nan]), np.array([np.nan])) is None
    assert compare(np.dtype("f8"), np.dtype("f8")) is None
    assert "shape" in (compare(a, a[None]) or "")
    assert (compare(a, a.astype(np.float32)) or "").startswith("dtype differs")
    assert "max abs diff" in (compare(a, a + 1e-6) or "")
    assert "values differ" in (compare(np.arange(3), np.array([0, 1, 3])) or "")
    assert "items" in (compare((a, a), (a,)) or "")
    assert compare(a, np.ones(5), shape_only=True) is None


def test_digest_tells_bits_apart() -> None:
    """The hash compared across ranks differs for a one-ulp change and for another dtype."""
    digest = numpy_coverage.digest
    a = np.linspace(0, 1, 5)
    assert digest((a, 1)) == digest([a.copy(), 1])
    assert digest(a) != digest(np.nextafter(a, 2))
    assert digest(np.arange(3)) != digest(np.arange(3, dtype=np.int32))


def test_error_family_groups_messages() -> None:
    """Function names, shapes and placements drop out, so alike errors group together."""
    family = numpy_coverage.error_family
    first = "UnsupportedError: np.ptp on DArrays (placements (S(0),)) is not supported yet"
    second = "UnsupportedError: np.trace on DArrays (placements (S(1),)) is not supported yet"
    assert family(first) == family(second)
    assert family("`np.ptp(m)`: " + first) == family(first)


def test_verdicts_take_the_worst_sample() -> None:
    """A name with one wrong sample is wrong; one that raised is unsupported; else handled."""
    rows = [
        {"group": "numpy", "name": "a", "code": "1", "verdict": "handled", "note": "", "forms": ""},
        {"group": "numpy", "name": "a", "code": "2", "verdict": "wrong", "note": "x", "forms": ""},
        {"group": "numpy", "name": "b", "code": "3", "verdict": "unsupported", "note": "E: y",
         "forms": ""},
        {"group": "fft", "name": "c", "code": "4", "verdict": "handled", "note": "", "forms": ""},
    ]  # fmt: skip
    verdicts = numpy_coverage.name_verdicts(rows)
    assert {key[1]: v["verdict"] for key, v in verdicts.items()} == {
        "a": "wrong",
        "b": "unsupported",
        "c": "handled",
    }
    text = "\n".join(numpy_coverage.summary(rows, 2))
    assert text.index("WRONG ANSWERS: 1") < text.index("## Counts")
    assert "| **overall**" in text
