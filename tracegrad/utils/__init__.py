"""`tracegrad.utils`: helpers outside the tensor core (`data`: datasets and loaders;
`checkpoint`: activation checkpointing)."""
from . import checkpoint, data  # noqa: F401
