"""`tracegrad.utils`: helpers outside the tensor core (`data`: datasets and loaders)."""
from . import data  # noqa: F401
