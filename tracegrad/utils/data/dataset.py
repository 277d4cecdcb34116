"""Datasets: the map-style `Dataset` protocol, `TensorDataset`, `Subset`, `ConcatDataset`,
`IterableDataset`, and `random_split`."""
import bisect
import math
import warnings

from ..._errors import TracegradValueError
from ...ops.creation import randperm
from ...ops.generator import default_generator


class SizeMismatchError(TracegradValueError, AssertionError):
    """Tensors given to `TensorDataset` differ in their first dimension (PyTorch raises
    AssertionError here; this is also a ValueError)."""


class Dataset:
    """A map-style dataset: `__getitem__(index)` and (usually) `__len__()`."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: subclasses implement `__iter__`."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        raise NotImplementedError("ChainDataset is not supported by tracegrad")


class TensorDataset(Dataset):
    """Samples are `(t[i] for t in tensors)`: the tensors share their first dimension.

    >>> ds = TensorDataset(tracegrad.arange(4.0), tracegrad.arange(4))
    >>> ds[1]
    (tensor(1.), tensor(1))
    """

    def __init__(self, *tensors):
        if any(tensors[0].size(0) != t.size(0) for t in tensors):
            raise SizeMismatchError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return getitems([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """The datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise TracegradValueError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TracegradValueError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise TracegradValueError("absolute value of index should not exceed dataset "
                                          "length")
            idx = len(self) + idx
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][idx - start]


def _lengths_from_fractions(fractions, n):
    lengths = [int(math.floor(n * f)) for f in fractions]
    for i in range(n - sum(lengths)):            # the remainder, round-robin from the front
        lengths[i % len(lengths)] += 1
    for i, length in enumerate(lengths):
        if length == 0:
            warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                          "empty dataset.", stacklevel=3)
    return lengths


def random_split(dataset, lengths, generator=default_generator):
    """Split `dataset` into non-overlapping random `Subset`s of the given `lengths` (ints
    summing to `len(dataset)`, or fractions summing to 1).

    >>> a, b = random_split(range(10), [0.8, 0.2], generator=tracegrad.Generator().manual_seed(0))
    >>> len(a), len(b)
    (8, 2)
    """
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise TracegradValueError(f"Fraction at index {i} is not between 0 and 1")
        lengths = _lengths_from_fractions(lengths, len(dataset))
    if sum(lengths) != len(dataset):
        raise TracegradValueError("Sum of input lengths does not equal the length of the "
                                  "input dataset!")
    lengths = [int(n) for n in lengths]
    order = randperm(sum(lengths), generator=generator).tolist()
    out, offset = [], 0
    for length in lengths:
        out.append(Subset(dataset, order[offset:offset + length]))
        offset += length
    return out
