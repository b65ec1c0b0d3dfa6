"""``make slurm-check``: the sbatch templates run on a real one-node Slurm.

Installs Debian's ``slurm-wlm`` and ``munge`` where ``sbatch``, ``slurmctld``,
``slurmd`` or ``munged`` is missing, starts ``munged`` if no munge daemon
answers, writes a one-node configuration for this machine into
``build/slurm/`` (cores and memory from ``slurmd -C``; ``proctrack/pgid`` and
``task/none``, which need neither systemd nor cgroups), starts ``slurmctld``
and ``slurmd`` from it, then submits with ``sbatch --wait``:

- ``cpu.sbatch`` running ``scripts/examples/heat2d.py`` at 2 ranks: exit 0,
  the ``dmesh.info`` report, heat2d's NumPy check;
- ``cpu.sbatch`` running a program whose rank 1 raises: a non-zero exit code
  and the traceback in the job's output;
- ``gpu.sbatch`` with its GPU requests as written (scaled to one node): the
  node declares GPUs to Slurm by count only (``gres.conf`` without device
  files) so that ``--gpus-per-node`` and ``--gpus-per-task`` are accepted;
  without a real GPU the job prints the ``dmesh.info`` report, then says it
  skips the GPU lines (``NO_GPU=skip``) and exits 0.

The daemons it started are stopped at the end, also when a check fails; a
failed check prints the job's output and the tails of the daemons' logs, and
the exit code is 1. Each step prints its duration. Needs root (it installs
packages and runs the daemons as root).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from mpi_env import rank_env

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "build" / "slurm"
TOOLS = ("sbatch", "slurmctld", "slurmd", "munged")
PACKAGES = ("slurm-wlm", "munge")
MUNGE_KEY = Path("/etc/munge/munge.key")
MUNGE_PID = Path("/run/munge/munged.pid")
RANKS = 2  # ranks of every job: one per core on a 2-core machine
JOB_TIMEOUT_S = 240  # sbatch --wait gives up after this (the jobs take about 10 s)
UP_TIMEOUT_S = 60  # for the node to come up idle
NO_GPU_LINE = "no GPU on this node"

# What the jobs' outputs must hold (regular expressions, one line each).
INFO = (r"^MPI library +\S", rf"^ranks +{RANKS} on 1 node\(s\)")
HEAT_OK = r"^max \|dmesh - numpy\| = \S+: OK$"
RAISED = "slurm-check: rank 1 raises on purpose"
RAISING_PROGRAM = f'''"""Rank 1 raises (written by scripts/slurm_check.py)."""
from mpi4py import MPI

import dmesh  # its excepthook aborts the whole job when a rank raises

if MPI.COMM_WORLD.Get_rank() == 1:
    raise RuntimeError("{RAISED}")
MPI.COMM_WORLD.Barrier()
'''


class CheckError(Exception):
    """A check failed; the message says which and why."""


@dataclass(frozen=True)
class Node:
    """The machine as ``slurmd -C`` describes it."""

    name: str
    cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    memory_mb: int


@dataclass(frozen=True)
class Job:
    """One ``sbatch --wait`` submission and what its output must show."""

    name: str
    template: str
    args: tuple[str, ...]
    options: tuple[str, ...]
    succeeds: bool
    expect: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)


def parse_node(text: str) -> Node:
    """The :class:`Node` of ``slurmd -C``'s ``NodeName=... CPUs=...`` line."""
    line = next((ln for ln in text.splitlines() if ln.startswith("NodeName=")), None)
    if line is None:
        raise CheckError(f"slurmd -C printed no NodeName= line:\n{text}")
    fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
    try:
        return Node(
            name=fields["NodeName"],
            cpus=int(fields["CPUs"]),
            sockets=int(fields.get("SocketsPerBoard", fields.get("Sockets", "1"))),
            cores_per_socket=int(fields["CoresPerSocket"]),
            threads_per_core=int(fields["ThreadsPerCore"]),
            memory_mb=int(fields["RealMemory"]),
        )
    except (KeyError, ValueError) as exc:
        raise CheckError(f"slurmd -C: cannot read {exc} from {line!r}") from exc


def slurm_conf(node: Node, run: Path, gpus: int) -> str:
    """``slurm.conf`` for a one-node cluster on ``node``, every file under ``run``.

    RealMemory is 90% of the machine's: slurmd drains a node that has less
    memory than configured. The node declares ``gpus`` GPUs (``gres.conf``).
    """
    memory = node.memory_mb * 9 // 10
    return f"""\
# One-node cluster of scripts/slurm_check.py (make slurm-check).
ClusterName=dmeshci
SlurmctldHost={node.name}(127.0.0.1)
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/pgid
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
GresTypes=gpu
SlurmctldPidFile={run}/slurmctld.pid
SlurmdPidFile={run}/slurmd.pid
StateSaveLocation={run}/state
SlurmdSpoolDir={run}/spool
SlurmctldLogFile={run}/slurmctld.log
SlurmdLogFile={run}/slurmd.log
NodeName={node.name} NodeAddr=127.0.0.1 CPUs={node.cpus} SocketsPerBoard={node.sockets} \
CoresPerSocket={node.cores_per_socket} ThreadsPerCore={node.threads_per_core} \
RealMemory={memory} Gres=gpu:{gpus}
PartitionName=debug Nodes={node.name} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def gres_conf(node: Node, devices: Sequence[Path]) -> str:
    """``gres.conf``: one GPU per file of ``devices`` (stand-ins, see :func:`fake_gpus`)."""
    return "".join(f"NodeName={node.name} Name=gpu File={path}\n" for path in devices)


def jobs(node: Node, run: Path) -> list[Job]:
    """The three submissions, sized for ``node``."""
    # Fewer cores than ranks: Slurm must be told to place 2 tasks on them.
    size = ("--nodes=1", f"--ntasks-per-node={RANKS}", "--cpus-per-task=1", "--time=5")
    size += ("--overcommit",) if node.cpus < RANKS else ()
    heat = "scripts/examples/heat2d.py"
    return [
        Job("cpu", "cpu.sbatch", (heat,), size, True, (*INFO, HEAT_OK)),
        Job("fail", "cpu.sbatch", (str(run / "raise.py"),), size, False,
            (r"^\[rank 1\] Traceback", rf"^\[rank 1\] RuntimeError: {RAISED}$")),
        Job("gpu", "gpu.sbatch", (heat,), (*size, f"--gpus-per-node={RANKS}"), True,
            (*INFO, rf"^{NO_GPU_LINE}.*skipping the GPU lines"), {"NO_GPU": "skip"}),
    ]  # fmt: skip


def problems(job: Job, returncode: int, output: str) -> list[str]:
    """What is wrong with a finished ``job``: its exit code, then each missing line."""
    found = []
    if job.succeeds and returncode != 0:
        found.append(f"sbatch --wait exited {returncode}, expected 0")
    if not job.succeeds and returncode == 0:
        found.append("sbatch --wait exited 0, expected a failure")
    for pattern in job.expect:
        if not re.search(pattern, output, re.MULTILINE):
            found.append(f"no line matching {pattern!r} in the job's output")
    return found


def job_id(sbatch_stdout: str) -> str | None:
    """The id in sbatch's ``Submitted batch job N``."""
    match = re.search(r"Submitted batch job (\d+)", sbatch_stdout)
    return match.group(1) if match else None


def exit_code(scontrol_show_job: str) -> str | None:
    """``ExitCode=`` of ``scontrol show job`` (``"1:0"``: status 1, no signal)."""
    match = re.search(r"\bExitCode=(\d+:\d+)", scontrol_show_job)
    return match.group(1) if match else None


# --- the machine ---------------------------------------------------------------------------


def run(cmd: Sequence[str], env: dict[str, str] | None = None, timeout: float = 60) -> str:
    """Run ``cmd``; its stdout, or :class:`CheckError` with its output if it fails."""
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CheckError(f"{' '.join(cmd)}: {exc}") from exc
    if done.returncode != 0:
        raise CheckError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def install() -> str:
    """apt-get install the packages if a tool is missing (apt-get update only if needed)."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if not missing:
        return "slurm-wlm and munge already installed"
    if shutil.which("apt-get") is None:
        raise CheckError(f"{', '.join(missing)} missing and no apt-get: install Slurm and munge")
    command = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        run(command, env, timeout=900)
    except CheckError:  # a fresh machine may have no package lists yet
        run(["apt-get", "update", "-q"], env, timeout=600)
        run(command, env, timeout=900)
    return f"installed {' '.join(PACKAGES)} (missing: {', '.join(missing)})"


def munge_answers() -> bool:
    """True if a munge daemon encodes and decodes a credential."""
    munge = subprocess.run(["munge", "-n"], capture_output=True, timeout=10)
    if munge.returncode != 0:
        return False
    return subprocess.run(["unmunge"], input=munge.stdout, capture_output=True).returncode == 0


def start_munge() -> int | None:
    """Start munged (a key first, if there is none) unless one answers; its pid if started."""
    if munge_answers():
        return None
    if not MUNGE_KEY.exists():
        MUNGE_KEY.parent.mkdir(parents=True, exist_ok=True)
        MUNGE_KEY.write_bytes(os.urandom(1024))
        MUNGE_KEY.chmod(0o400)
        shutil.chown(MUNGE_KEY, "munge", "munge")
    Path("/run/munge").mkdir(parents=True, exist_ok=True)
    run(["munged", "--force", f"--pid-file={MUNGE_PID}"])
    if not munge_answers():
        raise CheckError("munged started but munge -n | unmunge fails")
    return pid_from(MUNGE_PID, "munged")


def fake_gpus(run_dir: Path, count: int) -> list[Path]:
    """``count`` files for gres.conf to name as GPUs: slurmd drops a GPU without a file.

    Character devices with /dev/null's numbers (no job opens them: no cgroup
    constrains devices here); plain files where mknod is refused, which slurmd
    counts too, logging that they are no devices.
    """
    paths = [run_dir / f"fake-gpu{i}" for i in range(count)]
    for path in paths:
        try:
            os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        except OSError:
            path.touch()
    return paths


def process_name(pid: int) -> str | None:
    """The command name of a live process ``pid``, or None."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def children(parent: int, name: str) -> list[int]:
    """Live processes called ``name`` whose parent is ``parent``."""
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat_file.read_text()
        except OSError:
            continue
        comm, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :]
        if comm == name and int(rest.split()[1]) == parent:
            found.append(int(stat_file.parent.name))
    return found


def pid_from(path: Path, name: str) -> int | None:
    """The pid in ``path`` if it is a live process called ``name``."""
    try:
        pid = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if process_name(pid) == name else None


def daemons(run_dir: Path) -> dict[str, int]:
    """The live daemons whose pid files are in ``run_dir``, and slurmctld's slurmscriptd."""
    found = {}
    for name in ("slurmctld", "slurmd"):
        pid = pid_from(run_dir / f"{name}.pid", name)
        if pid is not None:
            found[name] = pid
    if "slurmctld" in found:
        for pid in children(found["slurmctld"], "slurmscriptd"):
            found["slurmscriptd"] = pid
    return found


def stop(pids: dict[str, int], timeout: float = 15) -> None:
    """SIGTERM each daemon, wait for all to exit, SIGKILL what is left."""
    for pid in pids.values():
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(process_name(p) for p in pids.values()):
        time.sleep(0.2)
    for name, pid in pids.items():
        if process_name(pid) == name:
            os.kill(pid, signal.SIGKILL)


def start_slurm(env: dict[str, str], conf: Path) -> dict[str, int]:
    """Start slurmctld and slurmd; their pids once the node is idle."""
    run(["slurmctld", "-f", str(conf)], env)
    run(["slurmd", "-f", str(conf)], env)
    deadline = time.monotonic() + UP_TIMEOUT_S
    state = ""
    while time.monotonic() < deadline and not state.startswith(("inval", "drain")):
        done = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], env=env, capture_output=True,
                              text=True, timeout=10)  # fmt: skip
        state = done.stdout.strip()
        if state == "idle":
            return daemons(conf.parent)
        time.sleep(0.5)
    reason = subprocess.run(["sinfo", "-h", "-N", "-o", "%E"], env=env, capture_output=True,
                            text=True, timeout=10).stdout.strip()  # fmt: skip
    raise CheckError(f"the node is {state or 'unknown'!r}, not idle (reason: {reason or 'none'})")


def submit(job: Job, env: dict[str, str], run_dir: Path) -> tuple[int, str, str | None]:
    """``sbatch --wait`` the job; its exit code, output and Slurm's ExitCode."""
    output = run_dir / f"{job.name}.out"
    cmd = ["sbatch", "--wait", f"--chdir={ROOT}", f"--output={output}",
           f"--job-name=slurm-check-{job.name}", *job.options,
           str(ROOT / "scripts" / "slurm" / job.template), *job.args]  # fmt: skip
    try:
        done = subprocess.run(cmd, env={**env, **job.env}, capture_output=True, text=True,
                              timeout=JOB_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise CheckError(f"job {job.name}: not done after {JOB_TIMEOUT_S} s") from exc
    text = output.read_text() if output.exists() else ""
    ident = job_id(done.stdout)
    code = None
    if ident is not None:
        shown = subprocess.run(["scontrol", "show", "job", ident], env=env, capture_output=True,
                               text=True, timeout=10)  # fmt: skip
        code = exit_code(shown.stdout)
    return done.returncode, text + done.stderr, code


# --- the steps -----------------------------------------------------------------------------


@contextmanager
def step(name: str) -> Iterator[Callable[[str], None]]:
    """Time a step; print its name, duration and the note it leaves."""
    notes: list[str] = []
    start = time.perf_counter()
    try:
        yield notes.append
    finally:
        note = f": {'; '.join(notes)}" if notes else ""
        print(f"slurm-check: {name}, {time.perf_counter() - start:.1f} s{note}", flush=True)


def tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of ``path`` (empty if it is missing)."""
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def report_failure(run_dir: Path, outputs: dict[str, str]) -> None:
    """Print the jobs' outputs and the tails of the daemons' logs."""
    for name, text in outputs.items():
        print(f"--- output of job {name} ---\n{text}")
    for log in ("slurmctld.log", "slurmd.log"):
        print(f"--- tail of {run_dir / log} ---\n{tail(run_dir / log)}")


def prepare(run_dir: Path) -> tuple[Node, Path]:
    """Stop daemons left by an earlier run, write a fresh run dir; the node and slurm.conf."""
    stale = daemons(run_dir)
    if stale:
        stop(stale)
    shutil.rmtree(run_dir, ignore_errors=True)
    (run_dir / "state").mkdir(parents=True)
    (run_dir / "spool").mkdir()
    node = parse_node(run(["slurmd", "-C"]))
    conf = run_dir / "slurm.conf"
    conf.write_text(slurm_conf(node, run_dir, RANKS))
    (run_dir / "gres.conf").write_text(gres_conf(node, fake_gpus(run_dir, RANKS)))
    (run_dir / "raise.py").write_text(RAISING_PROGRAM)
    return node, conf


def check(run_dir: Path = RUN) -> int:
    """Every step; 0 if every check passed."""
    started: dict[str, int] = {}
    outputs: dict[str, str] = {}
    failed = False
    begin = time.perf_counter()
    try:
        with step("install") as note:
            note(install())
        with step("munge") as note:
            munged = start_munge()
            started.update({"munged": munged} if munged is not None else {})
            note("munged started" if munged is not None else "munged already running")
        with step("start slurmctld and slurmd") as note:
            node, conf = prepare(run_dir)
            env = rank_env(RANKS, {**os.environ, "SLURM_CONF": str(conf)})
            env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
            started.update(start_slurm(env, conf))
            note(f"node {node.name}, {node.cpus} CPUs, {node.memory_mb} MB; up and idle")
        for job in jobs(node, run_dir):
            with step(f"job {job.name} ({job.template} {' '.join(job.args)})") as note:
                returncode, outputs[job.name], code = submit(job, env, run_dir)
                note(f"sbatch --wait exited {returncode}, Slurm's ExitCode {code}")
                wrong = problems(job, returncode, outputs[job.name])
                if wrong:
                    raise CheckError(f"job {job.name}: " + "; ".join(wrong))
    except CheckError as exc:
        print(f"slurm-check: FAILED: {exc}", flush=True)
        report_failure(run_dir, outputs)
        failed = True
    finally:
        with step("stop the daemons") as note:
            started.update(daemons(run_dir))
            munge = {"munged": started.pop("munged")} if "munged" in started else {}
            stop(started)  # the Slurm daemons first: they talk to munged as they stop
            stop(munge)
            note(", ".join(sorted([*started, *munge])) or "none running")
    verdict = "FAILED" if failed else "passed"
    print(f"slurm-check: {verdict} in {time.perf_counter() - begin:.1f} s", flush=True)
    return 1 if failed else 0


def main() -> int:
    """Check that this can run (root), then run every step."""
    if os.geteuid() != 0:
        print("slurm-check: needs root: it installs slurm-wlm and munge with apt-get and "
              "runs munged, slurmctld and slurmd as root; run it as root "
              "(sudo make slurm-check)")  # fmt: skip
        return 1
    return check()


if __name__ == "__main__":
    sys.exit(main())
