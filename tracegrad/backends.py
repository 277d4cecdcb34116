"""`tracegrad.backends`: the switches PyTorch programs commonly set or query
(`backends.cudnn.benchmark = True`, `backends.mps.is_available()`), answered as a
CPU-only PyTorch build answers them. Setting a flag is accepted and changes nothing:
tracegrad has one CPU backend (numpy)."""
from types import SimpleNamespace


def _false():
    return False


cudnn = SimpleNamespace(is_available=_false, enabled=True, benchmark=False,
                        deterministic=False, allow_tf32=True, version=lambda: None)
mps = SimpleNamespace(is_available=_false, is_built=_false)
cuda = SimpleNamespace(is_built=_false,
                       matmul=SimpleNamespace(allow_tf32=False,
                                              allow_fp16_reduced_precision_reduction=True))
