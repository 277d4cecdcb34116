"""`nn.MultiheadAttention` with PyTorch's parameters, names, init and forward contract.

Parameters, in PyTorch's registration order (so `state_dict()` keys and `parameters()` order
match and weights copy across by name): `in_proj_weight` (3E, E) when key/value dims equal
embed_dim, else `q_proj_weight`, `k_proj_weight`, `v_proj_weight`; `in_proj_bias` (3E,);
`bias_k`, `bias_v` (1, 1, E) with `add_bias_kv`; and the child `out_proj`
(a Linear printed as NonDynamicallyQuantizableLinear).
"""
from .. import _mode
from .._errors import TracegradValueError
from ..ops import creation as C
from . import init
from ._attention_functional import AttentionArgumentError, multi_head_attention_forward
from .layers import Linear
from .module import Module
from .parameter import Parameter


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear; only the name differs (PyTorch keeps it for its quantization tooling)."""


def _empty(*shape, dtype=None):
    from .. import _dtype as D
    return C.empty(*shape, dtype=dtype if dtype is not None else D.get_default_dtype())


class MultiheadAttention(Module):
    """Attention over `num_heads` heads: `MultiheadAttention(embed_dim, num_heads)`.

    `forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)` returns `(attn_output, attn_weights)`;
    inputs are (L, N, E), or (N, L, E) with `batch_first=True`, or unbatched (L, E).

    >>> mha = MultiheadAttention(8, 2)
    >>> out, w = mha(q, q, q)                  # doctest: +SKIP
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise TracegradValueError(f"embed_dim and num_heads must be greater than 0, got "
                                      f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.dropout, self.batch_first = num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AttentionArgumentError("embed_dim must be divisible by num_heads")
        self._add_projections(dtype, bias)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(_empty(1, 1, embed_dim, dtype=dtype))
            self.bias_v = Parameter(_empty(1, 1, embed_dim, dtype=dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _add_projections(self, dtype, bias):
        e = self.embed_dim
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(_empty(e, e, dtype=dtype))
            self.k_proj_weight = Parameter(_empty(e, self.kdim, dtype=dtype))
            self.v_proj_weight = Parameter(_empty(e, self.vdim, dtype=dtype))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(_empty(3 * e, e, dtype=dtype))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        if bias:
            self.in_proj_bias = Parameter(_empty(3 * e, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)

    def _reset_parameters(self):
        """PyTorch's init: xavier_uniform projections, zero biases, xavier_normal bias_k/v."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        with _mode.no_grad():
            if self.in_proj_bias is not None:
                self.in_proj_bias.zero_()
                self.out_proj.bias.zero_()
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                init.xavier_normal_(b)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        batched = query.ndim == 3
        if self.batch_first and batched:
            query, key, value = (t.transpose(1, 0) for t in (query, key, value))
        out, weights = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight, average_attn_weights=average_attn_weights,
            is_causal=is_causal)
        if self.batch_first and batched:
            out = out.transpose(1, 0)
        return out, weights
