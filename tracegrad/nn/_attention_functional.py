"""Attention in `nn.functional`: `scaled_dot_product_attention` and
`multi_head_attention_forward` (what `nn.MultiheadAttention` runs), PyTorch's math.

Mask conventions differ between the two, as in PyTorch:
- scaled_dot_product_attention: a bool `attn_mask` is True where attention is ALLOWED; a float
  mask is added to the scores; `is_causal` keeps key j <= query i. A query row with no
  allowed key gets zero output (PyTorch 2's rule), not NaN.
- multi_head_attention_forward: a bool `attn_mask` / `key_padding_mask` is True where
  attention is NOT allowed (it becomes -inf added to the scores); float masks are added.
Both are compositions of tracegrad ops (matmul, softmax, dropout...), so gradients of every
order and tracing come from those ops.
"""
import math

from .. import _dtype as D
from .. import ops as O
from .._errors import TracegradError, TracegradRuntimeError, op_error


class AttentionArgumentError(TracegradError, AssertionError):
    """An attention argument of the wrong shape (PyTorch checks these with `assert`)."""


def _causal_keep(L, S):
    """(L, S) bool: key j visible from query i when j <= i (torch.tril of ones)."""
    return O.ge(O.unsqueeze(O.arange(L), 1), O.unsqueeze(O.arange(S), 0))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(query @ key^T * scale + mask) @ value over (..., L, E), (..., S, E), (..., S, Ev).

    `scale` defaults to 1/sqrt(E); dropout (probability `dropout_p`) is applied to the
    attention weights whenever `dropout_p > 0`, as in PyTorch (pass 0.0 in eval mode).

    >>> q = tracegrad.ones(1, 2, 4)
    >>> scaled_dot_product_attention(q, q, q).shape
    torch.Size([1, 2, 4])
    """
    if not (query.dtype is key.dtype is value.dtype):
        raise op_error(TracegradRuntimeError, "scaled_dot_product_attention",
                       "Expected query, key, and value to have the same dtype, but got "
                       f"query.dtype: {query.dtype} key.dtype: {key.dtype} and value.dtype: "
                       f"{value.dtype} instead.")
    L, S = query.shape[-2], key.shape[-2]
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        key, value = _repeat_heads(key, query.shape[-3]), _repeat_heads(value, query.shape[-3])
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = O.mul(O.matmul(query, O.transpose(key, -2, -1)), scale)
    if is_causal:
        if attn_mask is not None:
            raise op_error(TracegradRuntimeError, "scaled_dot_product_attention",
                           "_scaled_dot_product_attention: Explicit attn_mask should not be "
                           "set when is_causal=True")
        attn_mask = _causal_keep(L, S)
    if attn_mask is not None:
        if attn_mask.dtype is D.bool_:
            scores = O.where(attn_mask, scores, float("-inf"))
        else:
            scores = O.add(scores, attn_mask)
    weights = O.softmax(scores, -1) if attn_mask is None else _safe_softmax(scores)
    if dropout_p > 0.0:
        from .functional import dropout
        weights = dropout(weights, dropout_p, training=True)
    return O.matmul(weights, value)


def _safe_softmax(scores):
    """softmax over the last dim, zero (not NaN) on rows where every score is -inf, as
    PyTorch's attention gives; such rows are zeroed before softmax, so no NaN reaches the
    gradient either."""
    dead = O.all(O.eq(scores, float("-inf")), -1, keepdim=True)
    w = O.softmax(O.where(dead, 0.0, scores), -1)
    return O.where(dead, 0.0, w)


def _repeat_heads(t, heads):
    """(..., Hk, S, E) -> (..., heads, S, E), each key head shared by heads // Hk queries."""
    *lead, hk, s, e = t.shape
    t = O.unsqueeze(t, -3)
    t = O.expand(t, tuple(lead) + (hk, heads // hk, s, e))
    return O.reshape(t, tuple(lead) + (heads, s, e))


def _float_mask(mask, like, name):
    """A bool mask (True = not allowed) as -inf/0 in `like`'s dtype; float masks unchanged."""
    if mask is None:
        return None
    if mask.dtype is D.bool_:
        return O.where(mask, float("-inf"), 0.0).to(like.dtype)
    if not mask.is_floating_point():
        raise op_error(TracegradRuntimeError, "multi_head_attention_forward",
                       f"only bool and floating types of {name} are supported")
    return mask


def _check(cond, msg):
    if not cond:
        raise AttentionArgumentError(msg)


def _in_projection(query, key, value, w, b, separate, q_w, k_w, v_w):
    from .functional import linear
    bq = bk = bv = None
    if b is not None:
        bq, bk, bv = O.chunk(b, 3)
    if not separate:
        wq, wk, wv = O.chunk(w, 3)
    else:
        wq, wk, wv = q_w, k_w, v_w
    return linear(query, wq, bq), linear(key, wk, bk), linear(value, wv, bv)


def _pad_last(t):
    """Append one zero column to the last dim (a mask growing with an added key)."""
    if t is None:
        return None
    return O.cat([t, O.zeros(tuple(t.shape[:-1]) + (1,), dtype=t.dtype)], -1)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """Multi-head attention on sequence-first (L, N, E) inputs (or unbatched (L, E)).

    Returns `(attn_output (L, N, E), weights)`; weights are (N, L, S) averaged over heads
    (or (N, H, L, S)) when `need_weights`, else None.
    """
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: static_k/static_v are not "
                                  "supported")
    batched = query.ndim == 3
    query, key, value, key_padding_mask = _batch(query, key, value, key_padding_mask, batched)
    L, N, E = query.shape
    _check_args(E, embed_dim_to_check, num_heads, is_causal, attn_mask)
    if key_padding_mask is not None:
        for d, want in ((0, N), (1, key.shape[0])):
            _check(key_padding_mask.shape[d] == want, f"Expected key_padded_mask.shape[{d}] to "
                   f"be {want}, but got {key_padding_mask.shape[d]}")
    key_padding_mask = _float_mask(key_padding_mask, query, "key_padding_mask")
    attn_mask = _float_mask(attn_mask, query, "attn_mask")
    q, k, v = _in_projection(query, key, value, in_proj_weight, in_proj_bias,
                             use_separate_proj_weight, q_proj_weight, k_proj_weight,
                             v_proj_weight)
    if attn_mask is not None:
        attn_mask = _mask_3d(attn_mask, L, key.shape[0], N * num_heads)
    q, k, v, attn_mask = _heads(q, k, v, attn_mask, key_padding_mask, bias_k, bias_v,
                                add_zero_attn, num_heads)
    S = k.shape[1]
    if not training:
        dropout_p = 0.0
    out, weights = _attend(q, k, v, attn_mask, dropout_p, need_weights, L, N, S, num_heads)
    from .functional import linear
    out = O.reshape(linear(out, out_proj_weight, out_proj_bias), (L, N, E))
    if weights is not None and average_attn_weights:
        weights = O.mean(weights, 1)
    if not batched:
        out = O.squeeze(out, 1)
        weights = None if weights is None else O.squeeze(weights, 0)
    return out, weights


def _batch(query, key, value, key_padding_mask, batched):
    """Unbatched (L, E) inputs as (L, 1, E), their key padding mask as (1, S)."""
    if batched:
        return query, key, value, key_padding_mask
    query, key, value = (O.unsqueeze(t, 1) for t in (query, key, value))
    if key_padding_mask is not None:
        key_padding_mask = O.unsqueeze(key_padding_mask, 0)
    return query, key, value, key_padding_mask


def _check_args(e, embed_dim_to_check, num_heads, is_causal, attn_mask):
    _check(e == embed_dim_to_check, f"was expecting embedding dimension of "
           f"{embed_dim_to_check}, but got {e}")
    _check((e // num_heads) * num_heads == e,
           f"embed_dim {e} not divisible by num_heads {num_heads}")
    if is_causal and attn_mask is None:
        raise op_error(TracegradRuntimeError, "multi_head_attention_forward",
                       "Need attn_mask if specifying the is_causal hint. You may use the "
                       "Transformer module method `generate_square_subsequent_mask` to create "
                       "this mask.")


def _heads(q, k, v, attn_mask, key_padding_mask, bias_k, bias_v, add_zero_attn, H):
    """Projected (L, N, E) q and (S, N, E) k, v as (N*H, L|S, E/H), with bias_k/bias_v and a
    zero key appended when asked, and the key padding mask merged into one float mask."""
    L, N, E = q.shape
    hd = E // H
    if bias_k is not None and bias_v is not None:
        k = O.cat([k, O.expand(bias_k, (1, N, E))])
        v = O.cat([v, O.expand(bias_v, (1, N, E))])
        attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)
    q, k, v = (O.transpose(O.reshape(t, (t.shape[0], N * H, hd)), 0, 1) for t in (q, k, v))
    if add_zero_attn:
        k = O.cat([k, O.zeros((N * H, 1, hd), dtype=k.dtype)], 1)
        v = O.cat([v, O.zeros((N * H, 1, hd), dtype=v.dtype)], 1)
        attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)
    S = k.shape[1]
    if key_padding_mask is not None:
        kpm = O.reshape(O.expand(O.reshape(key_padding_mask, (N, 1, 1, S)), (N, H, 1, S)),
                        (N * H, 1, S))
        attn_mask = kpm if attn_mask is None else O.add(attn_mask, kpm)
    return q, k, v, attn_mask


def _mask_3d(mask, L, S, bh):
    """A (L, S) mask as (1, L, S); a 3-D one must be (N * num_heads, L, S)."""
    if mask.ndim == 2:
        _check(tuple(mask.shape) == (L, S), f"The shape of the 2D attn_mask is "
               f"{tuple(mask.shape)}, but should be {(L, S)}.")
        return O.unsqueeze(mask, 0)
    _check(mask.ndim == 3 and tuple(mask.shape) == (bh, L, S),
           f"The shape of the 3D attn_mask is {tuple(mask.shape)}, but should be {(bh, L, S)}.")
    return mask


def _attend(q, k, v, mask, dropout_p, need_weights, L, N, S, H):
    """(output (L * N, E) before out_proj, weights (N, H, L, S) or None)."""
    E = q.shape[-1] * H
    if need_weights:
        scores = O.matmul(O.mul(q, math.sqrt(1.0 / q.shape[-1])), O.transpose(k, -2, -1))
        if mask is not None:
            scores = O.add(mask, scores)
        w = O.softmax(scores, -1)
        if dropout_p > 0.0:
            from .functional import dropout
            w = dropout(w, dropout_p, training=True)
        out = O.matmul(w, v)                                     # (N*H, L, hd)
        out = O.reshape(O.transpose(out, 0, 1), (L * N, E))
        return out, O.reshape(w, (N, H, L, S))
    if mask is not None:
        mask = O.unsqueeze(mask, 0) if mask.shape[0] == 1 else O.reshape(mask, (N, H, -1, S))
    q4, k4, v4 = (O.reshape(t, (N, H, t.shape[1], t.shape[2])) for t in (q, k, v))
    out = scaled_dot_product_attention(q4, k4, v4, mask, dropout_p)
    return O.reshape(O.permute(out, (2, 0, 1, 3)), (L * N, E)), None
