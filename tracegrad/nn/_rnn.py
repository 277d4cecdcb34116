"""Multi-layer recurrent modules `RNN`, `LSTM`, `GRU` with PyTorch's constructor, parameter
names (`weight_ih_l0`, ..., `_reverse` for the backward direction), initialization, shapes
(`batch_first`, unbatched input, `num_layers`, `bidirectional`), default zero states and
`dropout` between layers (training only, never after the last layer).

A layer projects the whole sequence with one matmul (`x W_ih^T + b_ih`), then loops over
time with the cell step of `_rnn_cells.py`; a traced program unrolls the loop. States keep
PyTorch's layout `(num_layers * num_directions, N, H)` whatever `batch_first` says.
Not supported: `proj_size` (raises) and packed sequences.
"""
import numbers
import warnings

from .. import _dtype as D
from ..ops import creation as C
from ..ops import shape as S
from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from . import functional as F
from ._rnn_cells import GATES, _mode_of, reset_uniform, rnn_step
from .module import Module
from .parameter import Parameter


class RNNBase(Module):
    """The shared machinery; `mode` is "LSTM", "GRU", "RNN_TANH" or "RNN_RELU"."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        _check_args(input_size, hidden_size, num_layers, dropout, proj_size)
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, 0
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", UserWarning)
        dirs = 2 if bidirectional else 1
        gate = GATES[mode] * hidden_size
        dt = dtype if dtype is not None else D.get_default_dtype()
        self._flat_weights_names = []
        for layer in range(num_layers):
            size_in = input_size if layer == 0 else hidden_size * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                shapes = [("weight_ih", (gate, size_in)), ("weight_hh", (gate, hidden_size))]
                if bias:
                    shapes += [("bias_ih", (gate,)), ("bias_hh", (gate,))]
                for name, shape in shapes:
                    setattr(self, name + sfx, Parameter(C.empty(shape, dtype=dt)))
                    self._flat_weights_names.append(name + sfx)
        self.reset_parameters()

    def reset_parameters(self):
        reset_uniform(self)

    def flatten_parameters(self):
        """A no-op (PyTorch packs cuDNN weights here; user code calls it anyway)."""

    @property
    def all_weights(self):
        per = 4 if self.bias else 2
        ws = [getattr(self, n) for n in self._flat_weights_names]
        return [ws[i:i + per] for i in range(0, len(ws), per)]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    def _weights(self, layer, d):
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        get = lambda n: getattr(self, n + sfx) if self.bias or "weight" in n else None  # noqa
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh")

    def forward(self, input, hx=None):
        """`input` (L, N, in) -- (N, L, in) if batch_first -- or unbatched (L, in); returns
        `(output, h_n)`, `(output, (h_n, c_n))` for an LSTM."""
        name = type(self).__name__
        if input.ndim not in (2, 3):
            raise op_error(TracegradValueError, name, f"{name}: Expected input to be 2D or 3D, "
                           f"got {input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise op_error(TracegradRuntimeError, name, "input.size(-1) must be equal to "
                           f"input_size. Expected {self.input_size}, got {input.shape[-1]}")
        unbatched = input.ndim == 2
        x = S.unsqueeze(input, 1) if unbatched else (
            S.transpose(input, 0, 1) if self.batch_first else input)
        lstm = self.mode == "LSTM"
        states = self._initial_states(x, hx, unbatched, lstm)
        out, finals = self._layers(x, states, lstm)
        if unbatched:
            out = S.squeeze(out, 1)
            finals = [S.squeeze(f, 1) for f in finals]
        elif self.batch_first:
            out = S.transpose(out, 0, 1)
        return out, (tuple(finals) if lstm else finals[0])

    def _initial_states(self, x, hx, unbatched, lstm):
        """[h0] or [h0, c0], each (layers * dirs, N, H)."""
        dirs = 2 if self.bidirectional else 1
        shape = (self.num_layers * dirs, x.shape[1], self.hidden_size)
        if hx is None:
            z = C.zeros(shape, dtype=x.dtype)
            return [z, z] if lstm else [z]
        hs = list(hx) if lstm else [hx]
        if unbatched:
            hs = [S.unsqueeze(h, 1) for h in hs]
        for i, h in enumerate(hs):
            if tuple(h.shape) != shape:
                what = f"hidden[{i}]" if lstm else "hidden"
                raise op_error(TracegradRuntimeError, type(self).__name__,
                               f"Expected {what} size {shape}, got {list(h.shape)}")
        return hs

    def _layers(self, x, states, lstm):
        dirs = 2 if self.bidirectional else 1
        finals = [[] for _ in states]
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                st = tuple(s[k] for s in states)
                seq, st = self._direction(x, st if lstm else st[0], layer, d)
                outs.append(seq)
                for f, s in zip(finals, st if lstm else (st,)):
                    f.append(s)
            x = outs[0] if dirs == 1 else S.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, [S.stack(f, 0) for f in finals]

    def _direction(self, x, state, layer, d):
        """Run one direction of one layer over the (L, N, in) sequence."""
        w_ih, w_hh, b_ih, b_hh = self._weights(layer, d)
        xw = F.linear(x, w_ih, b_ih)                       # all time steps in one matmul
        steps = range(x.shape[0] - 1, -1, -1) if d else range(x.shape[0])
        outs = [None] * x.shape[0]
        for t in steps:
            state = rnn_step(self.mode, xw[t], state, w_hh, b_hh)
            outs[t] = state[0] if self.mode == "LSTM" else state
        if not outs:
            raise op_error(TracegradRuntimeError, type(self).__name__,
                           "Expected sequence length to be larger than 0 in RNN")
        return S.stack(outs, 0), state


def _check_args(input_size, hidden_size, num_layers, dropout, proj_size):
    if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or \
            not 0 <= dropout <= 1:
        raise TracegradValueError("dropout should be a number in range [0, 1] representing the "
                                  "probability of an element being zeroed")
    if not isinstance(hidden_size, int) or isinstance(hidden_size, bool):
        raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
    if hidden_size <= 0:
        raise TracegradValueError("hidden_size must be greater than zero")
    if num_layers <= 0:
        raise TracegradValueError("num_layers must be greater than zero")
    if proj_size:
        raise NotImplementedError("tracegrad's LSTM does not support proj_size")


class RNN(RNNBase):
    """Elman RNN: `RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
    batch_first=False, dropout=0.0, bidirectional=False)`."""

    def __init__(self, *args, nonlinearity="tanh", **kwargs):
        if len(args) > 3:                   # positional nonlinearity, as PyTorch accepts
            nonlinearity, args = args[3], args[:3] + args[4:]
        super().__init__(_mode_of("RNN", nonlinearity), *args, **kwargs)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """`LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
    dropout=0.0, bidirectional=False)`; `forward(x, (h0, c0)=None) -> (out, (h_n, c_n))`.

    >>> out, (h, c) = LSTM(3, 5, batch_first=True)(tracegrad.ones(2, 7, 3))
    >>> out.shape, h.shape
    (torch.Size([2, 7, 5]), torch.Size([1, 2, 5]))
    """

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """`GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False)`; `forward(x, h0=None) -> (out, h_n)`."""

    def __init__(self, *args, **kwargs):
        super().__init__("GRU", *args, **kwargs)
