"""`tracegrad.utils.data`: datasets, samplers and `DataLoader`, with PyTorch's names,
defaults and errors. Loading happens in the calling process (see `DataLoader`)."""
from ._collate import default_collate, default_convert  # noqa: F401
from .dataloader import DataLoader, get_worker_info  # noqa: F401
from .dataset import (ConcatDataset, Dataset, IterableDataset, Subset,  # noqa: F401
                      TensorDataset, random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,  # noqa: F401
                      SubsetRandomSampler)
