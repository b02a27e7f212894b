"""Examples held in partitions where an executor runs them: the data of a data-parallel fit.

With a data-parallel executor (:class:`~cvxdp.run.executor.DaskExecutor` on a cluster,
:class:`~cvxdp.run.executor.PartitionedExecutor` in this process) the rows never come to the driver:
each partition is bound to the model where it lives (validated there, by the same
:meth:`Loss.bind <cvxdp.loss.Loss.bind>` as in a serial fit), and every per-example computation runs
there on its rows —

* the per-example Lipschitz constants and the tail histogram's counts (integers, summed exactly at
  the driver, where the noise is added: :func:`partition_tail_counts`);
* the rows of each batch of Algorithm 1 (:func:`partition_batch`), found from their global indices
  by the public shuffle (:mod:`cvxdp.run.shuffle`);
* the per-example maps of each round's problem and the oracle passes, which return sums
  (:mod:`cvxdp.erm.partitioned`).

The driver holds the handles, the partitions' sizes, the plan, the noise and the ledger.

**What is public.**  ``n`` and the partitions' sizes: like ``n``, the sizes must not depend on the
values (a partitioning by label would reveal the label counts) — a documented precondition, as for
how data are chunked in files.  Every task is a deterministic function of its partition and public
inputs, so a task Dask re-runs after a lost worker returns the same result.

Data can be given as a mapping of arrays held here (split into contiguous blocks), a mapping of Dask
arrays chunked along the rows (each row chunk a partition) or of Dask DataFrame columns
(``{"x": frame[features], "y": frame[label]}``, each partition a partition), or a list of partitions —
mappings of arrays, or Dask futures or delayed objects that produce them (e.g. generated on the
workers).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cvxdp.error import DataError
from cvxdp.geometry import Ball
from cvxdp.loss import Examples
from cvxdp.model import Model
from cvxdp.run.executor import placed_value
from cvxdp.run.shuffle import PublicShuffle


@dataclass
class Partition:
    """One partition's examples where they live: bound to the model sent with them (later tasks on
    the same rows reuse that model, so the loss objects match), and the global index of its first row."""

    model: Model
    examples: Examples
    start: int
    #: The rows' shuffled positions, ascending, once the rows are in that order (:func:`partition_sorted`).
    positions: np.ndarray | None = None

    @property
    def m(self) -> int:
        return self.examples.m

    def _span(self, shuffle: PublicShuffle, low: int, high: int) -> np.ndarray | slice:
        """The rows at positions ``[low, high)``: a slice when the rows are in shuffled order, else a
        boolean mask (from the rows' global indices)."""
        if self.positions is not None:
            a, b = np.searchsorted(self.positions, [low, high], side="left")
            return slice(int(a), int(b))
        return shuffle.rows_in(np.arange(self.start, self.start + self.m), low, high)


def _taken(arguments: list[tuple]) -> Iterator[tuple]:
    """The argument tuples, each dropped from the list as it is handed out (so a handle in them is held
    only by the task it was given to)."""
    arguments.reverse()
    while arguments:
        yield arguments.pop()


def bind_partition(model: Model, data: Mapping, start: int) -> Partition:
    """Validate and bind one partition's data (runs where the partition lives)."""
    return Partition(model, compact(model, model.bind(data)), int(start))


def compact(model: Model, examples: Examples) -> Examples:
    """``examples`` without the pieces of a piecewise-linear loss on a ball whose every example is
    generalized linear — every region of such a fit is a ball or a lens, where only the
    generalized-linear form is read (:meth:`Examples.release_pieces <cvxdp.loss.Examples.release_pieces>`):
    ``J + 1`` times the features' memory saved, the same function certified."""
    if isinstance(model.domain, Ball):
        examples.release_pieces()
    return examples


def partition_size(part: Partition) -> int:
    return part.m


def partition_tail_counts(part: Partition, edges: np.ndarray) -> np.ndarray:
    """The partition's counts of ``A(z_i)`` per bin of the tail histogram (integers; see
    :func:`~cvxdp.privacy.tail.tail_counts`)."""
    from cvxdp.privacy.tail import tail_counts

    return tail_counts(part.model, part.examples, edges)


def partition_sorted(part: Partition, shuffle: PublicShuffle) -> Partition:
    """The partition with its rows in shuffled order, so that every batch's share is a slice of it —
    a view, not a copy (one copy here, after which the unsorted rows are released)."""
    positions = shuffle.positions(np.arange(part.start, part.start + part.m))
    order = np.argsort(positions, kind="stable")
    return Partition(part.model, part.examples.subset(order), part.start, positions[order])


def partition_batch(part: Partition, shuffle: PublicShuffle, low: int, high: int) -> Partition:
    """The partition's rows that sit at shuffled positions in ``[low, high)`` — a batch's share (in the
    partition's order); ``start`` becomes the batch's first position (a label only)."""
    span = part._span(shuffle, low, high)
    if isinstance(span, slice):
        return Partition(part.model, part.examples.subset(span), low, part.positions[span])
    return Partition(part.model, part.examples.subset(np.nonzero(span)[0]), low)


def partition_batch_size(part: Partition, shuffle: PublicShuffle, low: int, high: int) -> int:
    span = part._span(shuffle, low, high)
    return span.stop - span.start if isinstance(span, slice) else int(np.count_nonzero(span))


def _call(job: tuple) -> object:
    fn, part, args = job
    return fn(placed_value(part), *args)


class Partitions:
    """Examples in partitions on an executor: their handles (Dask futures, or the objects themselves
    in this process) and their public sizes.

    Use :meth:`from_data`; :meth:`map` runs a function on every partition and brings its results
    here (only what it returns — sums, counts — ever travels), :meth:`place` makes new partitions
    where the old ones are.
    """

    def __init__(self, executor, handles: list, sizes: list[int]) -> None:
        self.executor = executor
        self.handles = list(handles)
        self.sizes = [int(s) for s in sizes]

    @property
    def n(self) -> int:
        return sum(self.sizes)

    @property
    def starts(self) -> list[int]:
        return [0, *itertools.accumulate(self.sizes)][:-1]

    def map(self, fn, *args) -> list:
        """``fn(partition, *args)`` on every partition, results in partition order."""
        return list(self.executor.map(_call, [(fn, h, args) for h in self.handles]))

    def map_each(self, fn, args: list[tuple]) -> list:
        """``fn(partition_i, *args[i])`` on every partition, results in partition order."""
        return list(self.executor.map(_call, [(fn, h, a) for h, a in zip(self.handles, args, strict=True)]))

    def place(self, fn, *args, sizes: list[int] | None = None) -> Partitions:
        """New partitions ``fn(partition, *args)``, kept where they are made; ``sizes`` are their row
        counts when known (else measured there)."""
        handles = self.executor.place(fn, [(h, *args) for h in self.handles])
        out = Partitions(self.executor, handles, sizes if sizes is not None else [0] * len(handles))
        if sizes is None:
            out.sizes = [int(s) for s in out.map(partition_size)]
        return out

    def sort_by(self, shuffle: PublicShuffle) -> None:
        """Put every partition's rows in shuffled order, in place of the unsorted ones, so batches are
        slices (:func:`partition_sorted`).  Nothing here holds the unsorted handles while the sorted
        partitions are made, so a cluster frees each unsorted partition once its sorted copy exists
        instead of all of them at the end (on a worker holding ten partitions of 5·10⁵ rows, their ten
        unsorted generalized-linear forms set the peak memory)."""
        arguments, self.handles = [(h, shuffle) for h in self.handles], []
        self.handles = self.executor.place(partition_sorted, _taken(arguments))

    def batch(self, shuffle: PublicShuffle, low: int, high: int) -> Partitions:
        """The rows at shuffled positions ``[low, high)``: one partition per partition that has any."""
        sizes = self.map(partition_batch_size, shuffle, low, high)
        keep = [i for i, s in enumerate(sizes) if s > 0]
        picked = Partitions(self.executor, [self.handles[i] for i in keep], [sizes[i] for i in keep])
        return picked.place(partition_batch, shuffle, low, high, sizes=picked.sizes)

    @classmethod
    def from_examples(cls, model: Model, examples: Examples, executor, partitions: int) -> Partitions:
        """Examples held here, split into ``partitions`` contiguous blocks (a public rule) and sent."""
        blocks = [idx for idx in np.array_split(np.arange(examples.m), max(1, min(partitions, examples.m)))
                  if idx.size]
        starts = [int(idx[0]) for idx in blocks]
        handles = executor.place(Partition, [(model, examples.subset(idx), s)
                                             for idx, s in zip(blocks, starts, strict=True)])
        return cls(executor, handles, [idx.size for idx in blocks])

    @classmethod
    def from_data(cls, model: Model, data: object, executor, partitions: int | None = None) -> Partitions:
        """Bind ``data`` where an executor will run it (see the module docstring for the forms).

        Arrays held here are split into ``partitions`` contiguous blocks (default: the executor's
        count) and sent once; Dask arrays keep their row chunks; a list keeps its partitions.  Each
        partition is validated where it lives, and its size is brought back (a failed validation
        raises here, before anything is charged or drawn).
        """
        parts = executor.materialize(_split(data, partitions if partitions is not None else
                                            executor.partitions))
        if not parts:
            raise DataError("the data set is empty; at least one example is needed.")
        sizes = _known_sizes(parts)
        if sizes is None:  # partitions made elsewhere (futures, delayed): bind them first, then count
            handles = executor.place(_bind_unknown_start, [(model, p) for p in parts])
            probe = Partitions(executor, handles, [0] * len(handles))
            sizes = [int(s) for s in probe.map(partition_size)]
            starts = [0, *itertools.accumulate(sizes)][:-1]
            handles = executor.place(_restart, [(h, s) for h, s in zip(handles, starts, strict=True)])
        else:
            starts = [0, *itertools.accumulate(sizes)][:-1]
            handles = executor.place(bind_partition, [(model, p, s) for p, s in
                                                      zip(parts, starts, strict=True)])
            # validation happens where the data live: wait for it before anything is charged
            Partitions(executor, handles, sizes).map(partition_size)
        if sum(sizes) == 0:
            raise DataError("the data set is empty; at least one example is needed.")
        return cls(executor, handles, sizes)


def _bind_unknown_start(model: Model, data: Mapping) -> Partition:
    return bind_partition(model, data, 0)


def _restart(part: Partition, start: int) -> Partition:
    return Partition(part.model, part.examples, int(start))


def _split(data: object, count: int) -> list:
    """Partitions of ``data``: mappings of arrays (or objects that produce them where they run)."""
    if isinstance(data, Mapping):
        data = {k: _dataframe_as_array(v) for k, v in data.items()}
        values = list(data.values())
        if values and all(_is_dask_array(v) for v in values):
            return _dask_partitions(data)
        if any(_is_dask_array(v) for v in values):
            raise DataError("mix of Dask and other arrays: give every placeholder's data as a Dask array "
                            "with the same row chunks, or none.")
        lengths = {len(np.asarray(v)) if np.ndim(v) else -1 for v in values}
        if len(lengths) != 1 or -1 in lengths:
            return [data]  # bind refuses it with its own message (shapes, scalars)
        m = lengths.pop()
        bounds = np.linspace(0, m, max(1, min(count, m)) + 1).round().astype(int)
        return [{k: np.asarray(v)[a:b] for k, v in data.items()} for a, b in itertools.pairwise(bounds)
                if b > a] or [data]
    if isinstance(data, Sequence) and not isinstance(data, str | bytes):
        return list(data)
    raise DataError("data for a data-parallel fit must be a mapping of arrays (NumPy or Dask) or a list of "
                    "partitions (mappings of arrays, or Dask futures / delayed objects that make them).")


def _dataframe_as_array(value: object) -> object:
    """A Dask DataFrame or Series as a Dask array with known row chunks (its partitions' lengths are
    counted where they live); anything else as it is."""
    if type(value).__module__.startswith("dask.dataframe") and hasattr(value, "to_dask_array"):
        return value.to_dask_array(lengths=True)
    return value


def _is_dask_array(value: object) -> bool:
    return type(value).__module__.startswith("dask.array") and hasattr(value, "chunks")


def _dask_partitions(data: Mapping) -> list:
    """One delayed mapping per row chunk of Dask arrays that share their row chunks."""
    arrays = dict(data)
    rows = {tuple(a.chunks[0]) for a in arrays.values()}
    if len(rows) != 1:
        raise DataError("the Dask arrays of a data set must share their row chunks (rechunk them alike).")
    blocks = {k: a.rechunk({i: -1 for i in range(1, a.ndim)}).to_delayed().reshape(-1) for k, a in
              arrays.items()}
    count = len(next(iter(rows)))
    from dask import delayed

    return [delayed(dict)(**{k: blocks[k][i] for k in arrays}) for i in range(count)]


def _known_sizes(parts: list) -> list[int] | None:
    sizes = []
    for p in parts:
        if not isinstance(p, Mapping):
            return None
        lengths = {len(np.asarray(v)) if np.ndim(v) else 0 for v in p.values()}
        sizes.append(lengths.pop() if len(lengths) == 1 else 0)
    return sizes


__all__ = [
    "Partition",
    "Partitions",
    "bind_partition",
    "compact",
    "partition_batch",
    "partition_batch_size",
    "partition_size",
    "partition_sorted",
    "partition_tail_counts",
]
