"""The "agree, then raise on every rank" helper of collectives (collectives/agreement.py).

Every case runs at every world size: nobody fails, one rank fails (each rank
in turn), every rank fails, ranks fail with different errors, an error class
the ranks cannot name, and a root that announced its failure in a header.
After each raise the communicator must still work (no rank was left inside
a collective), which the closing ``allreduce`` of each case checks.
"""

from __future__ import annotations

import re

import pytest
from mpi4py import MPI

from dmesh.collectives.agreement import raise_if_any_failed, raise_root_error
from dmesh.collectives.errors import ArgumentError, ArgumentTypeError, DMeshError, UnsupportedError
from helpers import assert_all, assert_raises_all


class _CallerError(DMeshError):
    """A caller's own class (as CheckpointError is), passed in ``kinds``."""


def _still_in_step(comm: MPI.Intracomm) -> None:
    assert_all(comm, comm.allreduce(1) == comm.Get_size(), "the ranks fell out of step")


def test_nobody_fails_returns_everywhere(comm: MPI.Intracomm) -> None:
    for _ in range(3):  # repeated: the vote leaves no message behind
        raise_if_any_failed(comm, None, "nothing")
    _still_in_step(comm)


@pytest.mark.parametrize("kind", [ArgumentError, ArgumentTypeError, UnsupportedError])
def test_one_rank_fails_every_rank_raises_its_error(
    comm: MPI.Intracomm, kind: type[DMeshError]
) -> None:
    size, rank = comm.Get_size(), comm.Get_rank()
    for bad in range(size):
        error = kind(f"block {bad} is wrong") if rank == bad else None
        caught = assert_raises_all(
            comm,
            kind,
            raise_if_any_failed,
            comm,
            error,
            "check",
            match=rf"^check: failed on rank\(s\) \[{bad}\] of {size}; rank {bad}: "
            f"block {bad} is wrong$",
        )
        # The failing rank keeps its own exception as the cause; the others have none.
        cause = None if caught is None else caught.__cause__
        assert_all(comm, (cause is error) if rank == bad else cause is None, repr(cause))
        _still_in_step(comm)


def test_every_rank_fails_lowest_rank_shown(comm: MPI.Intracomm) -> None:
    size, rank = comm.Get_size(), comm.Get_rank()
    ranks = list(range(size))
    assert_raises_all(
        comm,
        ArgumentError,
        raise_if_any_failed,
        comm,
        ArgumentError(f"rank {rank}'s file is missing"),
        match=rf"^failed on rank\(s\) {re.escape(str(ranks))} of {size}; "
        "rank 0: rank 0's file is missing$",
    )
    _still_in_step(comm)


def test_different_errors_take_the_lowest_failing_ranks_class(comm: MPI.Intracomm) -> None:
    size, rank = comm.Get_size(), comm.Get_rank()
    # Odd ranks raise a type error, even ranks from 2 a value error: the lowest
    # failing rank (1 if there is one, else nobody at one rank) decides.
    error: Exception | None = None
    if rank % 2 == 1:
        error = ArgumentTypeError(f"type problem on {rank}")
    elif rank >= 2:
        error = ArgumentError(f"value problem on {rank}")
    failed = [r for r in range(size) if r % 2 == 1 or r >= 2]
    if not failed:
        raise_if_any_failed(comm, error)
        return
    assert_raises_all(
        comm,
        ArgumentTypeError,
        raise_if_any_failed,
        comm,
        error,
        match=rf"failed on rank\(s\) {re.escape(str(failed))} of {size}; "
        "rank 1: type problem on 1$",
    )
    _still_in_step(comm)


def test_foreign_errors_arrive_as_the_fallback_naming_their_class(comm: MPI.Intracomm) -> None:
    size, rank = comm.Get_size(), comm.Get_rank()
    last = size - 1
    error = OSError("disk full") if rank == last else None
    caught = assert_raises_all(
        comm,
        _CallerError,
        raise_if_any_failed,
        comm,
        error,
        fallback=_CallerError,
        match=rf"rank {last}: OSError: disk full$",
    )
    assert_all(comm, rank != last or (caught is not None and caught.__cause__ is error))
    # A caller's class passed in kinds keeps its identity (exactly, not by subclass).
    own = _CallerError("manifest is corrupt") if rank == last else None
    assert_raises_all(
        comm,
        _CallerError,
        raise_if_any_failed,
        comm,
        own,
        kinds=(_CallerError,),
        match=rf"rank {last}: manifest is corrupt$",
    )
    # An unknown subclass of a known class is foreign: its class name is kept in the text.
    assert_raises_all(
        comm,
        ArgumentError,
        raise_if_any_failed,
        comm,
        _CallerError("not listed") if rank == last else None,
        match=rf"rank {last}: _CallerError: not listed$",
    )
    _still_in_step(comm)


def test_root_error_announced_in_a_header_is_raised_everywhere(comm: MPI.Intracomm) -> None:
    size, rank = comm.Get_size(), comm.Get_rank()
    for root in range(size):
        error = ArgumentTypeError("x: expected an array, got None") if rank == root else None
        assert_raises_all(
            comm,
            ArgumentTypeError,
            raise_root_error,
            comm,
            root,
            error,
            "broadcast",
            match=rf"^broadcast: failed on rank\(s\) \[{root}\] of {size}; rank {root}: x: ",
        )
    _still_in_step(comm)
