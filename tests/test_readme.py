"""The README's commands and programs work as written.

Every fenced block of README.md is one of these, told apart by its language
tag and by an HTML comment on the line just before it:

- ```` ```sh ````: command lines. Each runs from the repository root in bash,
  with the virtual environment's ``bin`` first on ``PATH`` (as after
  ``source .venv/bin/activate``), and must exit 0, except the commands in
  ``NOT_RUN`` and the programs in ``NOT_RUN_PROGRAMS``, each with its reason.
- ```` ```python ````: a complete program. It runs as
  ``mpiexec -n 4 python prog.py`` (or ``-n N`` where the block says
  ``mpiexec -n N`` in a comment) in a fresh directory, so the files it writes
  land there, and must exit 0.
- ```` ```python ```` after ``<!-- not run: reason -->``: shown, not run (a
  program that hangs by design, say). Keep these few.
- ```` ``` ```` with no tag: program output, never run.

Any other tag is an error, so that a misspelt tag cannot hide a block.

The jobs are launched from one process only: the tests that run them run
when the world has one rank (``make test`` also runs the suite at 2, 3 and 4
ranks, where they are skipped; every rank decides that from the world size).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from mpi4py import MPI

from helpers import assert_all, launch_job

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
VENV_BIN = Path(sys.executable).parent

# Command lines of ```sh blocks that are not run, and why.
NOT_RUN = {
    "make test": "the command that runs this test: it would run itself",
}
# Programs whose command lines are not run, and why.
NOT_RUN_PROGRAMS = {
    "srun": "needs a Slurm allocation",
    "sbatch": "needs a Slurm cluster",
    "MPI4PY_MPIABI=openmpi": "needs an Open MPI installed at /opt/openmpi",
}
PROGRAM_RANKS = 4  # mpiexec -n 4, unless the block says otherwise
PROGRAM_TIMEOUT = 120  # seconds per README program
COMMAND_TIMEOUT = 400  # seconds per command line (make demo sets up, then runs)

KINDS = {"sh", "python", ""}
NOT_RUN_MARK = re.compile(r"<!--\s*not run:\s*(?P<reason>.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    """One fenced block of the README: its language tag, first line number and text."""

    tag: str
    line: int
    text: str
    not_run: str | None  # the reason given in a `<!-- not run: ... -->` comment


def read_blocks(path: Path = README) -> list[Block]:
    """The fenced blocks of a Markdown file, in order."""
    blocks: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\S*)\s*$", lines[i])
        if fence is None:
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        before = lines[start - 1] if start > 0 else ""
        mark = NOT_RUN_MARK.search(before)
        blocks.append(
            Block(fence.group(1), start + 1, "\n".join(body) + "\n", mark and mark.group("reason"))
        )
        i += 1  # the closing fence
    return blocks


def command_lines(block: Block) -> list[str]:
    """The command lines of a shell block: no blanks or comments, continuations joined."""
    commands: list[str] = []
    pending = ""
    for raw in block.text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        commands.append(pending + line)
        pending = ""
    if pending:
        commands.append(pending.strip())
    return commands


def without_comment(command: str) -> str:
    return re.sub(r"\s+#.*$", "", command).strip()


def skip_reason(command: str) -> str | None:
    """Why a command line is not run, or None when it must be."""
    bare = without_comment(command)
    if bare in NOT_RUN:
        return NOT_RUN[bare]
    return NOT_RUN_PROGRAMS.get(bare.split()[0])


BLOCKS = read_blocks()
PROGRAMS = [b for b in BLOCKS if b.tag == "python" and b.not_run is None]
COMMANDS = [c for b in BLOCKS if b.tag == "sh" for c in command_lines(b)]


def _user_env() -> dict[str, str]:
    """This environment as a user who activated the venv has it, without this job's MPI.

    The process manager variables of the job running the tests are dropped (as
    ``helpers.launch_job`` does), so that an ``mpiexec`` inside a command
    starts a job of its own.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI", "HYDRA", "MPI"))}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(VENV_BIN.parent)
    return env


def _tail(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


def test_readme_blocks_have_known_kinds(comm: MPI.Intracomm) -> None:
    """Every block is sh, python or untagged output; every exception is named and given a reason."""
    problems = [f"line {b.line}: unknown tag {b.tag!r}" for b in BLOCKS if b.tag not in KINDS]
    problems += [
        f"line {b.line}: 'not run' needs a reason"
        for b in BLOCKS
        if b.not_run is not None and not b.not_run
    ]
    problems += [
        f"line {b.line}: only python blocks can be marked 'not run'"
        for b in BLOCKS
        if b.not_run is not None and b.tag != "python"
    ]
    bare = {without_comment(c) for c in COMMANDS}
    programs = {c.split()[0] for c in bare}
    problems += [f"NOT_RUN lists {c!r}, no longer in the README" for c in NOT_RUN if c not in bare]
    problems += [
        f"NOT_RUN_PROGRAMS lists {p!r}, no longer in the README"
        for p in NOT_RUN_PROGRAMS
        if p not in programs
    ]
    for wanted in ("make demo", "make test"):
        if wanted not in bare:
            problems.append(f"the README has no {wanted!r} command line")
    if not PROGRAMS:
        problems.append("no runnable python block found")
    assert_all(comm, not problems, "\n".join(problems))


@pytest.mark.job  # launches jobs of its own: run once, from one process
@pytest.mark.timeout(PROGRAM_TIMEOUT + 60)
@pytest.mark.parametrize("block", PROGRAMS, ids=[f"line{b.line}" for b in PROGRAMS])
def test_readme_program_runs(
    comm: MPI.Intracomm,
    block: Block,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The python block runs under mpiexec in a fresh directory and exits 0."""
    stated = re.search(r"#.*\bmpiexec -n (\d+)", block.text)
    ranks = int(stated.group(1)) if stated else PROGRAM_RANKS
    script = tmp_path / f"readme_line{block.line}.py"
    script.write_text(block.text)
    monkeypatch.chdir(tmp_path)  # the job's working directory: files it writes land here
    where = f"README.md python block at line {block.line} (mpiexec -n {ranks})"
    ok, message = _outcome(
        where, PROGRAM_TIMEOUT, lambda: launch_job(str(script), ranks, timeout=PROGRAM_TIMEOUT)
    )
    assert_all(comm, ok, message)


@pytest.mark.job  # launches jobs of its own: run once, from one process
@pytest.mark.timeout(COMMAND_TIMEOUT + 60)
@pytest.mark.parametrize("command", COMMANDS, ids=[without_comment(c) for c in COMMANDS])
def test_readme_command_runs(comm: MPI.Intracomm, command: str) -> None:
    """The command line runs from the repository root with the venv active and exits 0."""
    reason = skip_reason(command)
    if reason is not None:
        pytest.skip(f"{without_comment(command)!r} is not run: {reason}")
    where = f"README.md command {command!r}"
    ok, message = _outcome(
        where,
        COMMAND_TIMEOUT,
        lambda: subprocess.run(
            ["bash", "-c", command],
            cwd=ROOT,
            env=_user_env(),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
        ),
    )
    assert_all(comm, ok, message)


def _outcome(
    where: str, timeout: float, run: Callable[[], subprocess.CompletedProcess[str]]
) -> tuple[bool, str]:
    """(exited 0, what to report) for one launched program or command."""
    try:
        child = run()
    except subprocess.TimeoutExpired:
        return False, f"{where}: still running after {timeout} s"
    message = (
        f"{where}: exit {child.returncode}\n"
        f"stdout:\n{_tail(child.stdout)}\nstderr:\n{_tail(child.stderr)}"
    )
    return child.returncode == 0, message
