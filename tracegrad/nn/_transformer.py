"""`TransformerEncoderLayer` and `TransformerEncoder` (PyTorch's post-norm or pre-norm
block: self-attention and a feed-forward net, each with dropout and a residual), and the
causal mask helper `Transformer.generate_square_subsequent_mask`.

Composites of `MultiheadAttention`, `Linear`, `LayerNorm` and `Dropout`, with PyTorch's
submodule names (so `state_dict`s load either way). PyTorch's inference fast path (a fused
kernel taken in eval mode without grad) computes the same function; here it is the same
code in both modes. The decoder and the full encoder-decoder `Transformer` are in
`_transformer_decoder.py`.
"""
import copy

from .. import _dtype as D
from ..ops import creation as C
from ..ops import reduction as R
from ..ops import structure as ST
from ..ops import elementwise as E
from .._errors import TracegradRuntimeError
from . import functional as F
from ._attention import MultiheadAttention
from ._norm import LayerNorm
from .container import ModuleList
from .layers import Dropout, Linear
from .module import Module


def generate_square_subsequent_mask(sz, device=None, dtype=None):
    """(sz, sz) float mask: 0 on and below the diagonal, -inf above (future positions).

    >>> generate_square_subsequent_mask(2)
    tensor([[0., -inf],
            [0., 0.]])
    """
    dtype = dtype if dtype is not None else D.get_default_dtype()
    return ST.triu(C.full((sz, sz), float("-inf"), dtype=dtype), diagonal=1)


def _activation(activation):
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    if callable(activation):
        return activation
    raise TracegradRuntimeError(f"activation should be relu/gelu, not {activation}")


def _relu_or_gelu(fn):
    """PyTorch's `activation_relu_or_gelu` flag: 1 for relu, 2 for gelu, else 0."""
    from .layers import GELU as GELU_, ReLU as ReLU_
    if fn is F.relu or isinstance(fn, ReLU_):
        return 1
    return 2 if fn is F.gelu or isinstance(fn, GELU_) else 0


class TransformerEncoderLayer(Module):
    """`TransformerEncoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1,
    activation=F.relu, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
    bias=True)`; `forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)`.

    Post-norm: `x = norm1(x + sa(x)); x = norm2(x + ff(x))`; pre-norm (`norm_first`):
    `x = x + sa(norm1(x)); x = x + ff(norm2(x))`.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.activation = _activation(activation)
        self.activation_relu_or_gelu = _relu_or_gelu(self.activation)
        self.batch_first = batch_first

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = E.add(x, self._sa_block(self.norm1(x), src_mask, src_key_padding_mask,
                                        is_causal))
            return E.add(x, self._ff_block(self.norm2(x)))
        x = self.norm1(E.add(x, self._sa_block(x, src_mask, src_key_padding_mask, is_causal)))
        return self.norm2(E.add(x, self._ff_block(x)))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """`num_layers` deep copies of `encoder_layer`, then an optional final `norm`;
    `forward(src, mask=None, src_key_padding_mask=None, is_causal=None)`."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        first = self.layers[0] if len(self.layers) else None
        batch_first = getattr(first, "batch_first", False)
        seq_len = src.shape[1 if batch_first and src.ndim == 3 else 0]
        is_causal = _detect_is_causal_mask(mask, is_causal, seq_len)
        out = src
        for mod in self.layers:
            out = mod(out, src_mask=mask, is_causal=is_causal,
                      src_key_padding_mask=src_key_padding_mask)
        return self.norm(out) if self.norm is not None else out


def _seq_len(x, batch_first):
    """The sequence length of (S, E), (S, N, E) or, batch first, (N, S, E) input."""
    return x.shape[1 if batch_first and x.ndim == 3 else 0]


def _detect_is_causal_mask(mask, is_causal, size):
    """PyTorch's rule: an explicit `is_causal` wins; otherwise a mask equal to the causal
    mask of its size counts as causal (a value check: a guard when compiled)."""
    if is_causal is not None or mask is None:
        return bool(is_causal)
    causal = generate_square_subsequent_mask(size, dtype=mask.dtype)
    if tuple(mask.shape) != tuple(causal.shape):
        return False
    return bool(R.all(E.eq(mask, causal)))
