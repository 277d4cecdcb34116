"""`DataLoader`: batches from a dataset, in PyTorch's order and with its options.

Samples are read in the calling process. `num_workers > 0` is accepted and still loads in
the calling process (same batches, same order, no speed-up): tracegrad's tensors are numpy
arrays, and the usual bottleneck that workers hide (decoding files) is the user's
`__getitem__`. `pin_memory` is a no-op (there is no GPU).
"""
from ..._errors import TracegradValueError
from ._collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler


def get_worker_info():
    """None: data is always loaded in the main process."""
    return None


class _StreamSampler:
    """Stand-in sampler of an IterableDataset (indices are meaningless: yields None)."""

    def __iter__(self):
        while True:
            yield None


class DataLoader:
    """`DataLoader(dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
    num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
    worker_init_fn=None, multiprocessing_context=None, generator=None, *,
    prefetch_factor=None, persistent_workers=False, pin_memory_device='', in_order=True)`.

    >>> loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True,   # doctest: +SKIP
    ...                     generator=tracegrad.Generator().manual_seed(0))
    >>> for xb, yb in loader: ...                                               # doctest: +SKIP
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        _check_options(num_workers, timeout, prefetch_factor, persistent_workers)
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable and (shuffle not in (None, False) or sampler is not None
                               or batch_sampler is not None):
            which = ("shuffle" if shuffle not in (None, False) else
                     "sampler" if sampler is not None else "batch_sampler")
            raise TracegradValueError(f"DataLoader with IterableDataset: expected unspecified "
                                      f"{which} option, but got {which}="
                                      f"{locals()[which]!r}")
        sampler, batch_sampler, batch_size, drop_last = _samplers(
            self, dataset, batch_size, shuffle, sampler, batch_sampler, drop_last, generator)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    def __iter__(self):
        if self._iterable:
            return self._iter_stream()
        return self._iter_map()

    def _iter_map(self):
        ds = self.dataset
        getitems = getattr(ds, "__getitems__", None)
        if not self._auto_collation:
            for idx in self.sampler:
                yield self.collate_fn(ds[idx])
            return
        for indices in self.batch_sampler:
            samples = getitems(indices) if callable(getitems) else [ds[i] for i in indices]
            yield self.collate_fn(samples)

    def _iter_stream(self):
        it = iter(self.dataset)
        if not self._auto_collation:
            for sample in it:
                yield self.collate_fn(sample)
            return
        while True:
            batch = []
            for sample in it:
                batch.append(sample)
                if len(batch) == self.batch_size:
                    break
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield self.collate_fn(batch)

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)             # TypeError if the stream has no length
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self._auto_collation else self.sampler)


def _check_options(num_workers, timeout, prefetch_factor, persistent_workers):
    if num_workers < 0:
        raise TracegradValueError("num_workers option should be non-negative; use "
                                  "num_workers=0 to disable multiprocessing.")
    if timeout < 0:
        raise TracegradValueError("timeout option should be non-negative")
    if num_workers == 0 and prefetch_factor is not None:
        raise TracegradValueError("prefetch_factor option could only be specified in "
                                  "multiprocessing.let num_workers > 0 to enable "
                                  "multiprocessing, otherwise set prefetch_factor to None.")
    if persistent_workers and num_workers == 0:
        raise TracegradValueError("persistent_workers option needs num_workers > 0")


def _samplers(loader, dataset, batch_size, shuffle, sampler, batch_sampler, drop_last,
              generator):
    """Validate the sampling options as PyTorch does; returns the resolved
    (sampler, batch_sampler, batch_size, drop_last)."""
    if sampler is not None and shuffle:
        raise TracegradValueError("sampler option is mutually exclusive with shuffle")
    if batch_sampler is not None:
        if batch_size != 1 or shuffle or sampler is not None or drop_last:
            raise TracegradValueError("batch_sampler option is mutually exclusive with "
                                      "batch_size, shuffle, sampler, and drop_last")
        batch_size, drop_last = None, False
    elif batch_size is None and drop_last:
        raise TracegradValueError("batch_size=None option disables auto-batching and is "
                                  "mutually exclusive with drop_last")
    if sampler is None:
        if loader._iterable:
            sampler = _StreamSampler()
        elif shuffle:
            sampler = RandomSampler(dataset, generator=generator)
        else:
            sampler = SequentialSampler(dataset)
    if batch_size is not None and batch_sampler is None:
        batch_sampler = BatchSampler(sampler, batch_size, drop_last)
    return sampler, batch_sampler, batch_size, drop_last
