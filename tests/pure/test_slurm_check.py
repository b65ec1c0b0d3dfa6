"""scripts/slurm_check.py's pure parts: the node, the configuration, the verdict on a job.

The daemons and jobs themselves run in ``make slurm-check`` (a CI step), not here.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import slurm_check
from slurm_check import CheckError, Job

pytestmark = pytest.mark.pure

SLURMD_C = """\
NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105
UpTime=0-16:32:21
"""


def test_the_node_is_read_from_slurmd_c() -> None:
    node = slurm_check.parse_node(SLURMD_C)
    assert node == slurm_check.Node("vm", 2, 1, 2, 1, 24105)


@pytest.mark.parametrize("text", ["UpTime=0-16:32:21\n", "NodeName=vm CPUs=two\n"])
def test_an_unreadable_slurmd_c_is_an_error_that_quotes_it(text: str) -> None:
    with pytest.raises(CheckError, match="slurmd -C"):
        slurm_check.parse_node(text)


def test_the_configuration_fits_the_node(tmp_path: Path) -> None:
    node = slurm_check.parse_node(SLURMD_C)
    conf = slurm_check.slurm_conf(node, tmp_path, gpus=2)
    fields = dict(re.findall(r"(\w+)=(\S+)", conf))
    # 90% of the memory (slurmd drains a node with less than configured), the
    # node's own cores, plugins that need neither systemd nor cgroups.
    expect = {"CPUs": "2", "CoresPerSocket": "2", "RealMemory": str(24105 * 9 // 10),
              "ProctrackType": "proctrack/pgid", "TaskPlugin": "task/none", "Gres": "gpu:2",
              "StateSaveLocation": f"{tmp_path}/state"}  # fmt: skip
    assert {key: fields.get(key) for key in expect} == expect


def test_gres_names_one_file_per_gpu(tmp_path: Path) -> None:
    node = slurm_check.parse_node(SLURMD_C)
    text = slurm_check.gres_conf(node, [tmp_path / "a", tmp_path / "b"])
    assert text.splitlines() == [f"NodeName=vm Name=gpu File={tmp_path / n}" for n in "ab"]


JOB = Job("cpu", "cpu.sbatch", (), (), True, (r"^max \|dmesh - numpy\| = \S+: OK$",))
FAILING = Job("fail", "cpu.sbatch", (), (), False, (r"^\[rank 1\] Traceback",))


@pytest.mark.parametrize(
    ("job", "returncode", "output", "wrong"),
    [
        (JOB, 0, "x\nmax |dmesh - numpy| = 0.000e+00: OK\n", []),
        (JOB, 1, "max |dmesh - numpy| = 0.000e+00: OK\n", ["exited 1, expected 0"]),
        (JOB, 0, "max |dmesh - numpy| = 1.0: WRONG\n", ["no line matching"]),
        (FAILING, 1, "[rank 1] Traceback (most recent call last):\n", []),
        (FAILING, 0, "[rank 1] Traceback\n", ["exited 0, expected a failure"]),
        (FAILING, 143, "Terminated\n", ["no line matching"]),
    ],
)
def test_the_verdict_names_each_problem(job: Job, returncode: int, output: str,
                                        wrong: list[str]) -> None:  # fmt: skip
    found = slurm_check.problems(job, returncode, output)
    ok = len(found) == len(wrong) and all(w in f for w, f in zip(wrong, found, strict=True))
    assert ok, found


def test_job_id_and_exit_code_are_read_from_slurms_answers() -> None:
    assert slurm_check.job_id("Submitted batch job 17\n") == "17"
    assert slurm_check.job_id("sbatch: error: Batch job submission failed") is None
    shown = "JobId=17 JobName=x\n   JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0\n"
    assert slurm_check.exit_code(shown) == "1:0"


def test_the_jobs_ask_for_overcommit_only_where_cores_are_fewer_than_ranks(
    tmp_path: Path,
) -> None:
    few = slurm_check.Node("vm", 1, 1, 1, 1, 1000)
    enough = slurm_check.Node("vm", 2, 1, 2, 1, 1000)
    assert all("--overcommit" in job.options for job in slurm_check.jobs(few, tmp_path))
    assert not any("--overcommit" in job.options for job in slurm_check.jobs(enough, tmp_path))
