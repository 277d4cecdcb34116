"""Multi-layer recurrent modules `RNN`, `LSTM`, `GRU` with PyTorch's constructor, parameter
names (`weight_ih_l0`, ..., `_reverse` for the backward direction), initialization, shapes
(`batch_first`, unbatched input, `num_layers`, `bidirectional`), default zero states and
`dropout` between layers (training only, never after the last layer).

A layer projects the whole sequence with one matmul (`x W_ih^T + b_ih`), then loops over
time with the cell step of `_rnn_cells.py`; a traced program unrolls the loop. States keep
PyTorch's layout `(num_layers * num_directions, N, H)` whatever `batch_first` says.

An LSTM with `proj_size=P` has a `weight_hr_l{k}` (P, H) per layer and direction that
projects each output: h (and the layer's output, and `h_n`) has P features, c keeps H.
A `PackedSequence` input runs the layers over its packed rows (`_rnn_packed.py`) and returns
a `PackedSequence` with the same batch sizes and indices; `h0` is given and `h_n` returned
in the caller's (unsorted) batch order, as PyTorch does.
"""
import numbers
import warnings

from .. import _dtype as D
from ..ops import creation as C
from ..ops import shape as S
from ..ops.gather_scatter import index_select
from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from . import functional as F
from ._rnn_cells import GATES, _mode_of, reset_uniform, rnn_step
from ._rnn_packed import packed_direction
from .module import Module
from .parameter import Parameter
from .utils._packed import PackedSequence


class RNNBase(Module):
    """The shared machinery; `mode` is "LSTM", "GRU", "RNN_TANH" or "RNN_RELU"."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        _check_args(input_size, hidden_size, num_layers, dropout, proj_size)
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional = float(dropout), bidirectional
        self.proj_size = proj_size
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", UserWarning)
        dirs = 2 if bidirectional else 1
        gate = GATES[mode] * hidden_size
        dt = dtype if dtype is not None else D.get_default_dtype()
        real_hidden = proj_size or hidden_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            size_in = input_size if layer == 0 else real_hidden * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                shapes = [("weight_ih", (gate, size_in)), ("weight_hh", (gate, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate,)), ("bias_hh", (gate,))]
                if proj_size:
                    shapes += [("weight_hr", (proj_size, hidden_size))]
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
        per = (4 if self.bias else 2) + (1 if self.proj_size else 0)
        ws = [getattr(self, n) for n in self._flat_weights_names]
        return [ws[i:i + per] for i in range(0, len(ws), per)]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
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
        w_hr = getattr(self, "weight_hr" + sfx) if self.proj_size else None
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), w_hr

    def forward(self, input, hx=None):
        """`input` (L, N, in) -- (N, L, in) if batch_first -- or unbatched (L, in); returns
        `(output, h_n)`, `(output, (h_n, c_n))` for an LSTM."""
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        name = type(self).__name__
        if input.ndim not in (2, 3):
            raise op_error(TracegradValueError, name, f"{name}: Expected input to be 2D or 3D, "
                           f"got {input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise op_error(TracegradRuntimeError, name, "input.size(-1) must be equal to "
                           f"input_size. Expected {self.input_size}, got {input.shape[-1]}")
        self._check_dtype(input)
        unbatched = input.ndim == 2
        x = S.unsqueeze(input, 1) if unbatched else (
            S.transpose(input, 0, 1) if self.batch_first else input)
        lstm = self.mode == "LSTM"
        states = self._initial_states(x.shape[1], x.dtype, hx, unbatched, lstm)
        out, finals = self._layers(x, states, lstm, self._direction)
        if unbatched:
            out = S.squeeze(out, 1)
            finals = [S.squeeze(f, 1) for f in finals]
        elif self.batch_first:
            out = S.transpose(out, 0, 1)
        return out, (tuple(finals) if lstm else finals[0])

    def _forward_packed(self, input, hx):
        """A `PackedSequence` in, a `PackedSequence` out (see the module docstring)."""
        data, batch_sizes, sorted_indices, unsorted_indices = input
        if data.ndim != 2:
            raise op_error(TracegradRuntimeError, type(self).__name__,
                           f"input must have 2 dimensions, got {data.ndim}")
        if data.shape[-1] != self.input_size:
            raise op_error(TracegradRuntimeError, type(self).__name__, "input.size(-1) must be "
                           f"equal to input_size. Expected {self.input_size}, got "
                           f"{data.shape[-1]}")
        self._check_dtype(data)
        sizes = [int(b) for b in batch_sizes.tolist()]    # a guard when traced
        lstm = self.mode == "LSTM"
        states = self._initial_states(sizes[0], data.dtype, hx, False, lstm)
        if hx is not None and sorted_indices is not None:
            states = [index_select(h, 1, sorted_indices) for h in states]

        def run(x, state, layer, d):
            return packed_direction(self.mode, self._weights(layer, d), x, sizes, state, d)
        out, finals = self._layers(data, states, lstm, run)
        if unsorted_indices is not None:
            finals = [index_select(f, 1, unsorted_indices) for f in finals]
        out = PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices)
        return out, (tuple(finals) if lstm else finals[0])

    def _check_dtype(self, input):
        w = getattr(self, self._flat_weights_names[0])
        if input.dtype != w.dtype:
            raise op_error(TracegradValueError, type(self).__name__,
                           f"RNN input dtype ({input.dtype}) does not match weight dtype "
                           f"({w.dtype}). Convert input: input.to({w.dtype}), or convert "
                           f"model: model.to({input.dtype})")

    def _initial_states(self, batch, dtype, hx, unbatched, lstm):
        """[h0] or [h0, c0], each (layers * dirs, N, H) (h0: (layers * dirs, N, P) with
        projections)."""
        dirs = 2 if self.bidirectional else 1
        shape = (self.num_layers * dirs, batch, self.hidden_size)
        shapes = [shape[:2] + (self.proj_size or self.hidden_size,), shape]
        if hx is None:
            return [C.zeros(s, dtype=dtype) for s in shapes[:2 if lstm else 1]]
        hs = list(hx) if lstm else [hx]
        if unbatched:
            hs = [S.unsqueeze(h, 1) for h in hs]
        for i, (h, want) in enumerate(zip(hs, shapes)):
            if tuple(h.shape) != want:
                what = f"hidden[{i}]" if lstm else "hidden"
                raise op_error(TracegradRuntimeError, type(self).__name__,
                               f"Expected {what} size {want}, got {list(h.shape)}")
        return hs

    def _layers(self, x, states, lstm, run):
        """Every layer and direction, `run(x, state, layer, d) -> (output, final state)`
        doing one direction of one layer; dropout between layers in training mode."""
        dirs = 2 if self.bidirectional else 1
        finals = [[] for _ in states]
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                st = tuple(s[k] for s in states)
                seq, st = run(x, st if lstm else st[0], layer, d)
                outs.append(seq)
                for f, s in zip(finals, st if lstm else (st,)):
                    f.append(s)
            x = outs[0] if dirs == 1 else S.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, [S.stack(f, 0) for f in finals]

    def _direction(self, x, state, layer, d):
        """Run one direction of one layer over the (L, N, in) sequence."""
        w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, d)
        xw = F.linear(x, w_ih, b_ih)                       # all time steps in one matmul
        steps = range(x.shape[0] - 1, -1, -1) if d else range(x.shape[0])
        outs = [None] * x.shape[0]
        for t in steps:
            state = rnn_step(self.mode, xw[t], state, w_hh, b_hh, w_hr)
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
    if proj_size < 0:
        raise TracegradValueError("proj_size should be a positive integer or zero to disable "
                                  "projections")
    if proj_size >= hidden_size:
        raise TracegradValueError("proj_size has to be smaller than hidden_size")


def _no_proj(kwargs):
    if "proj_size" in kwargs:
        raise TracegradValueError("proj_size argument is only supported for LSTM, not RNN or "
                                  "GRU")


class RNN(RNNBase):
    """Elman RNN: `RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
    batch_first=False, dropout=0.0, bidirectional=False)`."""

    def __init__(self, *args, nonlinearity="tanh", **kwargs):
        _no_proj(kwargs)
        if len(args) > 3:                   # positional nonlinearity, as PyTorch accepts
            nonlinearity, args = args[3], args[:3] + args[4:]
        super().__init__(_mode_of("RNN", nonlinearity), *args, **kwargs)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """`LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
    dropout=0.0, bidirectional=False, proj_size=0)`; `forward(x, (h0, c0)=None) ->
    (out, (h_n, c_n))`; `x` may be a `PackedSequence`.

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
        _no_proj(kwargs)
        super().__init__("GRU", *args, **kwargs)
