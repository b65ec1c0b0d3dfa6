"""``make package``: build the sdist and the wheel, install the wheel, run it.

What a user gets from ``pip install dmesh`` is checked here, not the source
tree (``make test`` runs from an editable install, which hides a wheel that
lacks a subpackage):

1. The source is exported into ``build/package/src``: the files git tracks or
   would track, symbolic links kept as links, so that no ``*.egg-info`` left by
   an earlier build (setuptools reads its ``SOURCES.txt`` back) adds stale
   files. ``--ref REF`` exports a commit instead of the working tree.
2. ``python -m build`` builds the sdist, then the wheel from the unpacked
   sdist. The repository's ``dmesh/collectives`` and ``dmesh/ops`` are symbolic
   links to the top-level folders; the sdist must hold them as real files, or
   the wheel built from it (and ``pip install`` of the sdist) would lose them.
3. The wheel must hold every file of the ``dmesh`` package tree (each
   subpackage), and no top-level import name but ``dmesh``.
4. A fresh virtual environment gets the wheel with the ``mpi`` extra (numpy,
   mpi4py and MPICH from PyPI), and ``scripts/smoke_wheel.py`` runs under
   ``mpiexec -n 2`` from a temporary directory that also holds an ``ops.py``
   and a ``collectives.py`` which raise on import; then ``python -m
   dmesh.info`` runs there the same way.

Exits non-zero, naming what failed, on the first failure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from mpi_env import rank_env

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "package"
# Every subpackage of the installed tree; the wheel must hold each one's __init__.py.
SUBPACKAGES = (
    "dmesh",
    "dmesh/collectives",
    "dmesh/core",
    "dmesh/debug",
    "dmesh/io",
    "dmesh/ops",
    "dmesh/ops/indexing",
    "dmesh/ops/kernels",
    "dmesh/ops/rules",
)
# A user's files beside their script, named like dmesh's layers: importing one fails loudly.
TRAPS = ("ops", "collectives")
RANKS = 2
INSTALL_TIMEOUT = 600  # seconds: numpy, mpi4py and MPICH wheels from PyPI
RUN_TIMEOUT = 180  # seconds per mpiexec job


class PackageError(Exception):
    """A packaging check failed; the message says which and what was found."""


def run(command: list[str], *, cwd: Path, timeout: float, env: dict[str, str] | None = None) -> str:
    """Run ``command``; its output, or PackageError with the output when it fails."""
    shown = " ".join(command)
    try:
        child = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as error:
        raise PackageError(f"{shown}: still running after {timeout} s") from error
    if child.returncode != 0:
        raise PackageError(
            f"{shown} (in {cwd}) exited {child.returncode}\n"
            f"stdout:\n{child.stdout[-4000:]}\nstderr:\n{child.stderr[-4000:]}"
        )
    return child.stdout


def export_source(destination: Path, ref: str | None) -> None:
    """The project as git sees it (working tree, or commit ``ref``) in ``destination``."""
    shutil.rmtree(destination, ignore_errors=True)
    destination.mkdir(parents=True)
    if ref is not None:
        archive = destination.parent / "source.tar"
        run(["git", "archive", "--format=tar", f"--output={archive}", ref], cwd=ROOT, timeout=60)
        run(["tar", "-xf", str(archive), "-C", str(destination)], cwd=ROOT, timeout=60)
        archive.unlink()
        return
    listed = run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        timeout=60,
    )
    for name in filter(None, listed.split("\0")):
        source, target = ROOT / name, destination / name
        if not os.path.lexists(source):  # deleted in the working tree, not yet committed
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)


def package_files(source: Path) -> set[str]:
    """The files the wheel must hold: the dmesh tree, links followed, no caches."""
    found = set()
    for directory, names, files in os.walk(source / "dmesh", followlinks=True):
        names[:] = [n for n in names if n != "__pycache__"]
        for name in files:
            if name.endswith((".py", ".typed")):
                found.add((Path(directory) / name).relative_to(source).as_posix())
    return found


def check_sdist(sdist: Path, expected: set[str]) -> None:
    """The sdist holds every package file as a regular file (no symbolic links)."""
    with tarfile.open(sdist) as tar:
        members = {
            PurePosixPath(*PurePosixPath(m.name).parts[1:]).as_posix(): m for m in tar.getmembers()
        }
    links = sorted(name for name, m in members.items() if m.issym() or m.islnk())
    if links:
        raise PackageError(f"{sdist.name} holds links, not files: {links}")
    missing = sorted(expected - {name for name, m in members.items() if m.isfile()})
    if missing:
        raise PackageError(f"{sdist.name} lacks package files: {missing}")


def check_wheel(wheel: Path, expected: set[str]) -> None:
    """The wheel holds exactly the package files, under the one import name ``dmesh``."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    files = {n for n in names if ".dist-info/" not in n}
    missing = sorted(f"{p}/__init__.py" for p in SUBPACKAGES if f"{p}/__init__.py" not in files)
    missing += sorted(expected - files)
    if missing:
        raise PackageError(f"{wheel.name} lacks {missing}")
    top_level = sorted({n.split("/", 1)[0] for n in files} - {"dmesh"})
    if top_level:
        raise PackageError(
            f"{wheel.name} installs top-level names other than 'dmesh': {top_level}; "
            "collectives/ and ops/ must install as dmesh/collectives and dmesh/ops"
        )
    extra = sorted(files - expected)
    if extra:
        raise PackageError(f"{wheel.name} holds files that are not in the source tree: {extra}")


def job_env(venv: Path) -> dict[str, str]:
    """The environment of a user of the fresh venv: no source tree, no outer MPI job."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PMI", "HYDRA", "MPI", "PYTHON")) and key != "VIRTUAL_ENV"
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return rank_env(RANKS, env)


def smoke(venv: Path, wheel: Path) -> str:
    """Install the wheel into ``venv`` and run the smoke program and dmesh.info; their output."""
    shutil.rmtree(venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", str(venv)], cwd=WORK, timeout=120)
    python, mpiexec = str(venv / "bin" / "python"), str(venv / "bin" / "mpiexec")
    run(
        [python, "-m", "pip", "install", "--quiet", f"{wheel}[mpi]"],
        cwd=WORK,
        timeout=INSTALL_TIMEOUT,
    )
    env = job_env(venv)
    with tempfile.TemporaryDirectory(prefix="dmesh-smoke-") as tmp:
        here = Path(tmp)
        for name in TRAPS:
            (here / f"{name}.py").write_text(
                f'raise ImportError("the user\'s {name}.py: dmesh must not import it")\n'
            )
        shutil.copy2(ROOT / "scripts" / "smoke_wheel.py", here / "smoke_wheel.py")
        launch = [mpiexec, "-n", str(RANKS), python]
        output = run(launch + ["smoke_wheel.py"], cwd=here, env=env, timeout=RUN_TIMEOUT)
        info = run(launch + ["-m", "dmesh.info"], cwd=here, env=env, timeout=RUN_TIMEOUT)
    if f"ranks            {RANKS} on" not in info:
        raise PackageError(f"python -m dmesh.info at {RANKS} ranks printed:\n{info}")
    return output + info


def main() -> int:
    """Build, inspect, install and run; 0 when every check passes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", help="build this commit (git archive) instead of the working tree")
    args = parser.parse_args()
    source, dist = WORK / "src", WORK / "dist"
    try:
        export_source(source, args.ref)
        shutil.rmtree(dist, ignore_errors=True)
        # No --sdist/--wheel: build makes the sdist, then the wheel from the unpacked sdist.
        run(
            [sys.executable, "-m", "build", "--outdir", str(dist), str(source)],
            cwd=WORK,
            timeout=600,
        )
        (sdist,), (wheel,) = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
        expected = package_files(source)
        check_sdist(sdist, expected)
        check_wheel(wheel, expected)
        print(f"{sdist.name}, {wheel.name}: {len(expected)} package files, real files, only dmesh")
        print(smoke(WORK / "venv", wheel), end="")
    except PackageError as error:
        print(f"make package: FAILED\n{error}", file=sys.stderr)
        return 1
    print("make package: the wheel installs and runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
