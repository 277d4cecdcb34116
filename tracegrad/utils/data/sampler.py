"""Samplers: which indices a `DataLoader` reads, and in which batches.

Randomness comes from tracegrad's `Generator`: pass `generator=tg.Generator().manual_seed(s)`
for a fixed order, or leave it None to draw a fresh seed from the default generator (so
`tg.manual_seed(s)` makes every epoch's order reproducible, as in PyTorch).
"""
from ..._errors import TracegradTypeError, TracegradValueError
from ...ops.creation import randint, randperm
from ...ops.generator import Generator, default_generator


class Sampler:
    """Base class: iterating yields dataset indices."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


def _fresh_generator():
    # drawn through the op, not the generator's numpy state: a traced draw (an epoch
    # iterated inside a compiled function) is then a recorded draw and a guard on the seed,
    # never the first epoch's seed replayed as a constant
    seed = int(randint(0, 2 ** 63 - 1, (), generator=default_generator))
    return Generator().manual_seed(seed)


class RandomSampler(Sampler):
    """A random permutation (or, with `replacement`, `num_samples` independent draws)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TracegradTypeError("replacement should be a boolean value, but got "
                                     f"replacement={replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise TracegradValueError("num_samples should be a positive integer value, but "
                                      f"got num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        gen = self.generator if self.generator is not None else _fresh_generator()
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from randint(high=n, size=(32,), generator=gen).tolist()
            yield from randint(high=n, size=(self.num_samples % 32,), generator=gen).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from randperm(n, generator=gen).tolist()
        yield from randperm(n, generator=gen).tolist()[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given `indices` in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        gen = self.generator if self.generator is not None else _fresh_generator()
        for i in randperm(len(self.indices), generator=gen).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class BatchSampler(Sampler):
    """Group the indices of `sampler` into lists of `batch_size` (the last one shorter
    unless `drop_last`).

    >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    """

    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise TracegradValueError("batch_size should be a positive integer value, but got "
                                      f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise TracegradValueError("drop_last should be a boolean value, but got "
                                      f"drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
