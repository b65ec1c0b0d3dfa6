"""all_to_all and permute against NumPy on one process."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

import dmesh.collectives as C
from helpers import assert_all, assert_equal_all, assert_raises_all
from references import DATA_MOVEMENT_DTYPES, rank_array


def all_to_all_reference(
    inputs: list[np.ndarray], split_axis: int, concat_axis: int, rank: int
) -> np.ndarray:
    n = len(inputs)
    pieces = [np.array_split(x, n, axis=split_axis)[rank] for x in inputs]
    return np.concatenate(pieces, axis=concat_axis)


@pytest.mark.parametrize("ndim", [1, 2, 3])
@pytest.mark.parametrize("with_sizes", [False, True])
def test_all_to_all_every_axis_pair(comm: MPI.Intracomm, ndim: int, with_sizes: bool) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    for split_axis, concat_axis in itertools.product(range(ndim), repeat=2):
        for dtype in (np.float64, np.int8, np.complex64, np.bool_):
            # Uneven everywhere: the split axis does not divide by n, and each
            # rank's length along the concat axis differs (rank 0 may be empty).
            def shape_of(
                r: int, split_axis: int = split_axis, concat_axis: int = concat_axis
            ) -> tuple[int, ...]:
                shape = [2, 3, 2][:ndim]
                shape[split_axis] = n + 1
                if concat_axis != split_axis:
                    shape[concat_axis] = r % 3
                return tuple(shape)

            inputs = [rank_array(shape_of(r), dtype, r) for r in range(n)]
            kwargs = {}
            if with_sizes:
                split = np.array_split(np.arange(n + 1), n)
                kwargs = {
                    "split_sizes": [len(s) for s in split],
                    "concat_sizes": [
                        len(split[rank]) if concat_axis == split_axis else shape_of(q)[concat_axis]
                        for q in range(n)
                    ],
                }
            result = C.all_to_all(inputs[rank], split_axis, concat_axis, comm, **kwargs)
            expected = all_to_all_reference(inputs, split_axis, concat_axis, rank)
            assert_equal_all(comm, result, expected)


@pytest.mark.parametrize("async_op", [False, True])
@pytest.mark.parametrize("uneven", [False, True])
def test_all_to_all_keeps_the_own_piece_out_of_mpi(
    comm: MPI.Intracomm, async_op: bool, uneven: bool
) -> None:
    """Pieces above SELF_LOCAL_BYTES: each rank's own piece is copied from its
    input, never sent to itself; the rest arrive by Alltoallv. Every axis
    pair, equal pieces promised (sizes_agree) and uneven ones, sync and async."""
    n, rank = comm.Get_size(), comm.Get_rank()
    rows = C.exchange.SELF_LOCAL_BYTES // 8 + 3  # float64: each piece is over the bound
    length = n * rows + (n - 1 if uneven else 0)
    for split_axis, concat_axis in itertools.product(range(2), repeat=2):

        def shape_of(r: int, split_axis: int = split_axis, concat_axis: int = concat_axis) -> Any:
            shape = [3, 3]
            shape[split_axis] = length
            if concat_axis != split_axis:
                shape[concat_axis] = 3 + (r % 2 if uneven else 0)
            return tuple(shape)

        inputs = [rank_array(shape_of(r), np.float64, r) for r in range(n)]
        split = [len(p) for p in np.array_split(np.arange(length), n)]
        concat = [
            split[rank] if concat_axis == split_axis else shape_of(q)[concat_axis] for q in range(n)
        ]
        got = C.all_to_all(
            inputs[rank], split_axis, concat_axis, comm, split_sizes=split, concat_sizes=concat,
            sizes_agree=True, async_op=async_op,
        )  # fmt: skip
        if async_op:
            got = got.wait()
        expected = all_to_all_reference(inputs, split_axis, concat_axis, rank)
        assert_equal_all(comm, got, expected)


def test_all_to_all_explicit_uneven_split(comm: MPI.Intracomm) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    # Every row goes to the last rank; the others receive empty pieces.
    inputs = [rank_array((5, 2), np.float32, r) for r in range(n)]
    sizes = [0] * (n - 1) + [5]
    result = C.all_to_all(inputs[rank], 0, 1, comm, split_sizes=sizes)
    pieces = [x[: sizes[rank]] if rank == n - 1 else x[:0] for x in inputs]
    assert_equal_all(comm, result, np.concatenate(pieces, axis=1))


@pytest.mark.parametrize("shape", [(), (0,), (4,), (2, 3)])
def test_permute_ring_shift(comm: MPI.Intracomm, shape: tuple[int, ...]) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    for dtype in DATA_MOVEMENT_DTYPES:
        inputs = [rank_array(shape, dtype, r) for r in range(n)]
        ring = [(r, (r + 1) % n) for r in range(n)]
        result = C.permute(inputs[rank], ring, comm)
        assert_equal_all(comm, result, inputs[(rank - 1) % n])


def test_permute_open_chain_with_uneven_blocks(comm: MPI.Intracomm) -> None:
    n, rank = comm.Get_size(), comm.Get_rank()
    # Rank r holds r + 1 rows and sends them to rank r + 1; rank 0 receives nothing.
    inputs = [rank_array((r + 1, 2), np.int64, r) for r in range(n)]
    chain = [(r, r + 1) for r in range(n - 1)]
    recv_shape = (rank, 2) if rank > 0 else None
    result = C.permute(inputs[rank], chain, comm, recv_shape=recv_shape)
    if rank == 0:
        assert_all(comm, result is None, f"rank 0 receives nothing, got {result!r}")
    else:
        assert_equal_all(comm, result, inputs[rank - 1])


@pytest.mark.parametrize("length", [2, 400])
def test_all_to_all_sizes_unknown_small_and_large(comm: MPI.Intracomm, length: int) -> None:
    """Small arrays travel inside the shape exchange, larger ones take a second round."""
    n, rank = comm.Get_size(), comm.Get_rank()
    # (0, 1): concat lengths differ by rank; (0, 0): split lengths differ by rank.
    by_columns = [rank_array((n * length + 1, r + 1), np.float64, r) for r in range(n)]
    by_rows = [rank_array((r * length + 1, 2), np.float64, r) for r in range(n)]
    for inputs, split_axis, concat_axis in ((by_columns, 0, 1), (by_rows, 0, 0)):
        result = C.all_to_all(inputs[rank], split_axis, concat_axis, comm)
        expected = all_to_all_reference(inputs, split_axis, concat_axis, rank)
        assert_equal_all(comm, result, expected)
    many = [rank_array((2 * n,) + (1,) * 8, np.int8, r) for r in range(n)]
    result = C.all_to_all(many[rank], 0, 8, comm)
    assert_equal_all(comm, result, all_to_all_reference(many, 0, 8, rank))


def test_all_to_all_mismatch_seen_by_every_rank(comm: MPI.Intracomm) -> None:
    """Split lengths 5 and 4 over 2 ranks give pieces (3, 2) and (2, 2): only rank 0 would
    notice from the pieces alone; every rank sees every shape, so all raise."""
    n, rank = comm.Get_size(), comm.Get_rank()
    if n < 2:
        pytest.skip("needs two ranks to disagree")
    x = np.ones((5 if rank == 0 else 4, 2))
    assert_raises_all(comm, ValueError, C.all_to_all, x, 0, 1, comm, match="rank 1 has")


def test_all_to_all_equal_pieces_on_some_ranks_only(comm: MPI.Intracomm) -> None:
    # Rank 0 sends and receives equal pieces; the last rank does not. Each
    # rank alone could pick a different MPI call (Alltoall against
    # Alltoallv) and hang; the exchange must complete with the right data.
    n, rank = comm.Get_size(), comm.Get_rank()
    counts = np.ones((n, n), dtype=int)
    counts[n - 1, n - 1] = 2  # the last rank sends 2 elements to itself
    x = np.arange(counts[rank].sum(), dtype=np.float64) + 100 * rank
    got = C.all_to_all(x, 0, 0, comm, split_sizes=counts[rank], concat_sizes=counts[:, rank])
    starts = np.cumsum(counts, axis=1) - counts  # where each piece begins in its sender's x
    want = np.concatenate(
        [
            np.arange(starts[q, rank], starts[q, rank] + counts[q, rank]) + 100.0 * q
            for q in range(n)
        ]
    )
    assert_equal_all(comm, got, want)
    # The same sizes on every rank, promised: equal pieces take the plain call.
    same = np.arange(2 * n, dtype=np.float64) + 10 * rank
    got = C.all_to_all(
        same, 0, 0, comm, split_sizes=[2] * n, concat_sizes=[2] * n, sizes_agree=True
    )
    want = np.concatenate([np.arange(2 * rank, 2 * rank + 2) + 10.0 * q for q in range(n)])
    assert_equal_all(comm, got, want)


def test_every_rank_picks_the_same_mpi_call_with_empty_pieces(
    comm: MPI.Intracomm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redistributions whose pieces have no elements on some ranks: a one-row
    array whose columns all sit on rank 0 (a slice of a Shard(1) array) moved
    to Shard(0), its transpose the other way, and arrays with no columns.
    Every rank must choose MPI_Alltoall or MPI_Alltoallv alike: the choice used
    to come from each rank's element counts, all zero on a rank that holds and
    receives nothing, and Open MPI hung where rank 0 called Alltoallv and
    rank 1 Alltoall (np.insert of a row found it)."""
    import dmesh
    from dmesh import Shard
    from dmesh.collectives import exchange

    n = comm.Get_size()
    choices: list[bool] = []
    chooser = exchange.equal_pieces

    def recorded(sizes_agree: bool, pieces: Any, incoming: Any) -> bool:
        choices.append(chooser(sizes_agree, pieces, incoming))
        return choices[-1]

    monkeypatch.setattr(exchange, "equal_pieces", recorded)
    wide = np.arange(4.0 * n)[None, :] - 3
    with dmesh.init_mesh((n,), comm=comm) as mesh:
        arrays = [
            (dmesh.distribute(wide, mesh, [Shard(1)])[:, :2], wide[:, :2], Shard(0)),
            (dmesh.distribute(wide.T, mesh, [Shard(0)])[:2], wide.T[:2], Shard(1)),
            (dmesh.distribute(np.zeros((n, 0)), mesh, [Shard(0)]), np.zeros((n, 0)), Shard(1)),
        ]
        for a, want, target in arrays:
            got = a.redistribute(mesh, [target])
            assert_equal_all(comm, got.full_array(), want)
            row = np.insert(a, 1, a[:1] * 2, axis=0)
            assert_equal_all(comm, row.full_array(), np.insert(want, 1, want[:1] * 2, axis=0))
    every = comm.allgather(choices)
    assert_all(comm, n == 1 or len(every[0]) > 0, "no all_to_all chose a call")
    assert_all(comm, all(c == every[0] for c in every), f"ranks chose differently: {every}")
