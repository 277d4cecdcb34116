"""`tracegrad.nn.utils`: gradient clipping, parameter/vector conversion, parametrizations and
weight/spectral normalization (PyTorch names)."""
from .clip_grad import (clip_grad_norm, clip_grad_norm_, clip_grad_value_,  # noqa: F401
                        clip_grads_with_norm_, get_total_norm)
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401
from . import rnn  # noqa: F401,E402
from . import parametrize, parametrizations  # noqa: F401,E402
from ._weight_norm_hooks import (remove_spectral_norm, remove_weight_norm,  # noqa: F401,E402
                                 spectral_norm, weight_norm)
