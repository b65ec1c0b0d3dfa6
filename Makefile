# dmesh: the commands the README names. Everything installs into .venv from
# PyPI (MPICH included, through the `mpi` extra), so no system MPI is needed.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
DOCS_STAMP    := $(VENV)/.docs-stamp
PACKAGE_STAMP := $(VENV)/.package-stamp
RANKS  ?= 1 2 3 4
# The oldest NumPy dmesh supports: the X of "numpy>=X" in pyproject.toml, so that
# the floor is written in one place. make test-numpy-floor installs exactly it.
NUMPY_FLOOR := $(shell sed -n 's/.*"numpy>=\([0-9.]*\)".*/\1/p' pyproject.toml)
FLOOR_VENV  := .venv-floor
FLOOR_STAMP := $(FLOOR_VENV)/.installed-stamp
FLOOR_RANKS ?= 1 2

.PHONY: setup demo test test-numpy-floor lint format bench docs package slurm-check clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[mpi,test,dev]'
	touch $(STAMP)

# The main job: a 2-D heat diffusion with halo exchange and a checkpoint on a
# (2, 2) mesh of 4 ranks, checked against NumPy (scripts/demo.py).
demo: $(STAMP)
	$(PY) scripts/mpi_env.py 4 $(VENV)/bin/mpiexec -n 4 $(PY) scripts/demo.py

# The whole suite under mpiexec -n 1, 2, 3 and 4; ends with one summary line.
test: $(STAMP)
	$(PY) scripts/run_tests.py --ranks $(RANKS)

# The suite again on the oldest NumPy that pyproject.toml allows, in a venv of its
# own (.venv-floor: numpy==$(NUMPY_FLOOR), the other packages as make setup installs
# them), at 1 and 2 ranks only: enough to catch a NumPy API newer than the floor
# (an import or a call that fails). 2 min 8 s on the 2-core dev machine, against
# about 11 min for make test; creating the venv adds 15 s (pip's cache warm).
test-numpy-floor: $(FLOOR_STAMP)
	$(FLOOR_VENV)/bin/python scripts/run_tests.py --ranks $(FLOOR_RANKS) \
		--logs build/test-logs-numpy-floor

$(FLOOR_STAMP): pyproject.toml
	$(PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(FLOOR_VENV)/bin/python -m pip install --quiet -e '.[mpi,test]' 'numpy==$(NUMPY_FLOOR)'
	$(FLOOR_VENV)/bin/python -c "import numpy as np; v = np.__version__.split('.'); \
		f = '$(NUMPY_FLOOR)'.split('.'); assert v[:len(f)] == f and set(v[len(f):]) <= {'0'}, v"
	touch $(FLOOR_STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# scripts/slurm/cpu.sbatch and gpu.sbatch submitted with sbatch --wait to a
# one-node Slurm started here (Debian's slurm-wlm and munge, installed with
# apt-get if missing; needs root); the daemons are stopped at the end.
slurm-check: $(STAMP)
	$(PY) scripts/slurm_check.py

bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) scripts/bench.py

# The HTML reference (docs/ and the docstrings) in build/docs/html. Any Sphinx
# warning fails the build (-W), unresolved cross-references included (-n), on
# a fresh environment (-E: autodoc sees every docstring change);
# then every relative link of README.md and docs/ must resolve inside the
# repository (nothing is fetched: CI has no internet).
docs: $(DOCS_STAMP)
	$(PY) -m sphinx -b html -E -W --keep-going -n -q docs build/docs/html
	$(PY) scripts/check_links.py README.md docs

$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

# The sdist and the wheel (built from the sdist) in build/package/dist, checked
# for every subpackage, installed into a fresh venv and smoke-tested under
# mpiexec -n 2 from a directory holding a user's ops.py and collectives.py.
package: $(PACKAGE_STAMP)
	$(PY) scripts/check_package.py

$(PACKAGE_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[package]'
	touch $(PACKAGE_STAMP)

clean:
	rm -rf $(VENV) $(FLOOR_VENV) build *.egg-info
