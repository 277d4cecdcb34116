"""Recurrent cells: one time step of an Elman RNN, an LSTM and a GRU (PyTorch's gate order,
equations and initialization), as step functions the multi-layer modules in `_rnn.py` reuse
and as the modules `RNNCell`, `LSTMCell`, `GRUCell`.

Everything is a composite of existing ops (linear, sigmoid, tanh, chunk), so gradients,
tracing and the JAX backend come with them. Equations (x the input, h the state):

    RNN:  h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)          (or relu)
    LSTM: i, f, g, o = chunk(x W_ih^T + b_ih + h W_hh^T + b_hh, 4)
          c' = sigmoid(f) * c + sigmoid(i) * tanh(g);  h' = sigmoid(o) * tanh(c')
    GRU:  r, z, n from chunk(., 3) of the input and hidden projections separately:
          r = sigmoid(x_r + h_r);  z = sigmoid(x_z + h_z);  n = tanh(x_n + r * h_n)
          h' = (1 - z) * n + z * h

The step functions take the input projection `xw = x W_ih^T + b_ih` already computed, so a
layer projects all time steps with one matmul and loops only over the hidden projection.
"""
import math

from .. import _dtype as D
from ..ops import creation as C
from ..ops import elementwise as E
from ..ops import shape as S
from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def rnn_step(mode, xw, state, w_hh, b_hh, w_hr=None):
    """One step: `xw` the projected input (N, G*H); `state` h, or (h, c) for an LSTM.
    Returns the new state (same structure). An LSTM with projections (`w_hr`, (P, H))
    projects its output: h' = (sigmoid(o) * tanh(c')) W_hr^T, so h has P features."""
    if mode == "LSTM":
        h, c = state
        i, f, g, o = S.chunk(E.add(xw, F.linear(h, w_hh, b_hh)), 4, -1)
        c = E.add(E.mul(E.sigmoid(f), c), E.mul(E.sigmoid(i), E.tanh(g)))
        h = E.mul(E.sigmoid(o), E.tanh(c))
        return (h if w_hr is None else F.linear(h, w_hr)), c
    if mode == "GRU":
        h = state
        xr, xz, xn = S.chunk(xw, 3, -1)
        hr, hz, hn = S.chunk(F.linear(h, w_hh, b_hh), 3, -1)
        r, z = E.sigmoid(E.add(xr, hr)), E.sigmoid(E.add(xz, hz))
        n = E.tanh(E.add(xn, E.mul(r, hn)))
        return E.add(n, E.mul(z, E.sub(h, n)))       # (1 - z) * n + z * h
    pre = E.add(xw, F.linear(state, w_hh, b_hh))
    return E.tanh(pre) if mode == "RNN_TANH" else E.relu(pre)


def reset_uniform(module):
    """PyTorch's init of every recurrent weight and bias: U(-1/sqrt(H), 1/sqrt(H))."""
    std = 1.0 / math.sqrt(module.hidden_size) if module.hidden_size > 0 else 0
    for p in module.parameters():
        init.uniform_(p, -std, std)


def _mode_of(name, nonlinearity):
    if name != "RNN":
        return name
    if nonlinearity not in ("tanh", "relu"):
        raise TracegradValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' "
                                  "or 'relu'.")
    return "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"


class _CellBase(Module):
    """`weight_ih` (G*H, input), `weight_hh` (G*H, H), `bias_ih`, `bias_hh` (G*H)."""

    _name = "RNN"

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.mode = _mode_of(self._name, nonlinearity)
        if self._name == "RNN":
            self.nonlinearity = nonlinearity
        g = GATES[self.mode] * hidden_size
        dt = dtype if dtype is not None else D.get_default_dtype()
        self.weight_ih = Parameter(C.empty(g, input_size, dtype=dt))
        self.weight_hh = Parameter(C.empty(g, hidden_size, dtype=dt))
        if bias:
            self.bias_ih = Parameter(C.empty(g, dtype=dt))
            self.bias_hh = Parameter(C.empty(g, dtype=dt))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        reset_uniform(self)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _check(self, input):
        if input.ndim not in (1, 2):
            raise op_error(TracegradValueError, type(self).__name__,
                           f"{type(self).__name__}: Expected input to be 1D or 2D, got "
                           f"{input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise op_error(TracegradRuntimeError, type(self).__name__,
                           f"input has inconsistent input_size: got {input.shape[-1]} "
                           f"expected {self.input_size}")

    def _zeros(self, input):
        shape = (input.shape[0], self.hidden_size) if input.ndim == 2 else (self.hidden_size,)
        return C.zeros(shape, dtype=input.dtype)

    def _step(self, input, state):
        xw = F.linear(input, self.weight_ih, self.bias_ih)
        return rnn_step(self.mode, xw, state, self.weight_hh, self.bias_hh)


def _batched(input, hx):
    """Unbatched (1-D) inputs run as a batch of one; `hx` likewise."""
    if input.ndim == 1:
        return S.unsqueeze(input, 0), (None if hx is None else S.unsqueeze(hx, 0)), True
    return input, hx, False


class RNNCell(_CellBase):
    """`h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`; `nonlinearity="relu"` for ReLU.

    >>> RNNCell(3, 5)(tracegrad.ones(2, 3)).shape
    torch.Size([2, 5])
    """

    def forward(self, input, hx=None):
        self._check(input)
        x, h, one = _batched(input, hx)
        h = self._zeros(x) if h is None else h
        out = self._step(x, h)
        return S.squeeze(out, 0) if one else out


class GRUCell(_CellBase):
    """One GRU step (reset, update, new gates in PyTorch's order)."""

    _name = "GRU"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, device=device, dtype=dtype)

    forward = RNNCell.forward


class LSTMCell(_CellBase):
    """One LSTM step: `forward(input, (h, c)=None) -> (h', c')` (input, forget, cell, output
    gates in PyTorch's order)."""

    _name = "LSTM"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        self._check(input)
        one = input.ndim == 1
        x = S.unsqueeze(input, 0) if one else input
        if hx is None:
            h = c = self._zeros(x)
        else:
            h, c = hx
            if one:
                h, c = S.unsqueeze(h, 0), S.unsqueeze(c, 0)
        h, c = self._step(x, (h, c))
        return (S.squeeze(h, 0), S.squeeze(c, 0)) if one else (h, c)
