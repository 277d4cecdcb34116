"""`tracegrad.cuda`: the CUDA namespace of a CPU-only library.

Everything answers the way PyTorch's CPU-only build does: nothing is available, there are
zero devices, and calls that need a GPU raise `DeviceUnavailableError`
("Torch not compiled with CUDA enabled", naming tracegrad).
"""
from ._device import DeviceUnavailableError, _unavailable


def is_available():
    """False: tracegrad runs on the CPU only."""
    return False


def device_count():
    return 0


def is_initialized():
    return False


def _lazy_init():
    raise DeviceUnavailableError(_unavailable("cuda"))


def current_device():
    _lazy_init()


def set_device(device):
    _lazy_init()


def get_device_name(device=None):
    _lazy_init()


def synchronize(device=None):
    _lazy_init()


def manual_seed(seed):
    """Seeding CUDA generators is a no-op without CUDA (as in PyTorch)."""


def manual_seed_all(seed):
    """Seeding CUDA generators is a no-op without CUDA (as in PyTorch)."""


def empty_cache():
    """Nothing to free without CUDA (as in PyTorch)."""


class _AmpNamespace:
    """`torch.cuda.amp`: PyTorch's deprecated spellings of `amp.GradScaler("cuda", ...)`
    and `amp.autocast("cuda", ...)`, with its FutureWarning."""

    @staticmethod
    def GradScaler(init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                   growth_interval=2000, enabled=True):
        import warnings
        from .amp import GradScaler
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        return GradScaler("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                          enabled)

    @staticmethod
    def autocast(enabled=True, dtype=None, cache_enabled=True):
        import warnings
        from .amp import autocast
        warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        return autocast("cuda", dtype, enabled, cache_enabled)


amp = _AmpNamespace()
