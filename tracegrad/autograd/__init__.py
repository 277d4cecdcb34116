"""tracegrad.autograd: the engine and its user-facing API (PyTorch's torch.autograd)."""
from .anomaly_mode import (detect_anomaly, is_anomaly_check_nan_enabled,  # noqa: F401
                           is_anomaly_enabled, set_detect_anomaly)
from .api import backward, grad
from .function import Function, FunctionCtx, once_differentiable
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .graph import AccumulateGrad, Node
from . import functional  # noqa: E402  (after api: it uses autograd.grad)
from .. import _mode as _m

no_grad, enable_grad, set_grad_enabled, inference_mode = (
    _m.no_grad, _m.enable_grad, _m.set_grad_enabled, _m.inference_mode)


class _GradMode:
    is_enabled = staticmethod(_m.is_grad_enabled)


grad_mode = _GradMode

__all__ = ["backward", "grad", "Function", "FunctionCtx", "once_differentiable", "gradcheck",
           "gradgradcheck", "GradcheckError", "Node", "AccumulateGrad", "no_grad",
           "enable_grad", "set_grad_enabled", "inference_mode", "detect_anomaly",
           "set_detect_anomaly"]
