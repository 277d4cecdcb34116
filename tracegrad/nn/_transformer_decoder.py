"""`TransformerDecoderLayer`, `TransformerDecoder` and the full encoder-decoder
`Transformer` (Vaswani et al.), with PyTorch's constructors, submodule names (so a PyTorch
`state_dict` loads as is), init, masks and forward contract.

A decoder layer is self-attention over the target (`tgt_mask`, usually causal), then
attention from the target to the encoder's output `memory` (`memory_mask`), then the
feed-forward net; each sub-block has dropout and a residual, with LayerNorm after it
(post-norm) or before it (`norm_first`). Composites of `MultiheadAttention`, `Linear`,
`LayerNorm` and `Dropout`, so gradients, tracing and the JAX backend come from those.
"""
import copy

from .. import ops as O
from .._errors import TracegradRuntimeError
from . import functional as F
from . import init
from ._attention import MultiheadAttention
from ._norm import LayerNorm
from ._transformer import (TransformerEncoder, TransformerEncoderLayer, _activation,
                           _detect_is_causal_mask, _seq_len, generate_square_subsequent_mask)
from .container import ModuleList
from .layers import Dropout, Linear
from .module import Module


class TransformerDecoderLayer(Module):
    """`TransformerDecoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1,
    activation=F.relu, layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True)`;
    `forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)`.

    >>> layer = TransformerDecoderLayer(8, 2, 16)
    >>> layer(tracegrad.randn(5, 2, 8), tracegrad.randn(7, 2, 8)).shape
    torch.Size([5, 2, 8])
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                            batch_first=batch_first, bias=bias, dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                                 batch_first=batch_first, bias=bias,
                                                 dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1, self.dropout2, self.dropout3 = (Dropout(dropout), Dropout(dropout),
                                                       Dropout(dropout))
        self.activation = _activation(activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = O.add(x, self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                        tgt_is_causal))
            x = O.add(x, self._mha_block(self.norm2(x), memory, memory_mask,
                                         memory_key_padding_mask, memory_is_causal))
            return O.add(x, self._ff_block(self.norm3(x)))
        x = self.norm1(O.add(x, self._sa_block(x, tgt_mask, tgt_key_padding_mask,
                                               tgt_is_causal)))
        x = self.norm2(O.add(x, self._mha_block(x, memory, memory_mask,
                                                memory_key_padding_mask, memory_is_causal)))
        return self.norm3(O.add(x, self._ff_block(x)))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoder(Module):
    """`num_layers` deep copies of `decoder_layer`, then an optional final `norm`;
    `forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False)`.

    `tgt_is_causal=None` detects a causal `tgt_mask` by value, as PyTorch does."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        seq_len = _seq_len(tgt, self.layers[0].self_attn.batch_first)
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len)
        out = tgt
        for mod in self.layers:
            out = mod(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        return self.norm(out) if self.norm is not None else out


class Transformer(Module):
    """The encoder-decoder model: `Transformer(d_model=512, nhead=8, num_encoder_layers=6,
    num_decoder_layers=6, dim_feedforward=2048, dropout=0.1, activation=F.relu,
    custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5, batch_first=False,
    norm_first=False, bias=True)`.

    `forward(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
    src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    src_is_causal=None, tgt_is_causal=None, memory_is_causal=False)`. Every parameter of
    more than one dimension is re-initialized xavier-uniform, as in PyTorch.

    >>> model = Transformer(16, 2, 1, 1, 32)
    >>> src, tgt = tracegrad.randn(6, 3, 16), tracegrad.randn(5, 3, 16)
    >>> model(src, tgt, tgt_mask=Transformer.generate_square_subsequent_mask(5)).shape
    torch.Size([5, 3, 16])
    """

    generate_square_subsequent_mask = staticmethod(generate_square_subsequent_mask)

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation=F.relu, custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias,
                                            dtype=dtype)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias,
                                            dtype=dtype)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        batched = src.dim() == 3
        b = 0 if self.batch_first else 1
        if batched and src.shape[b] != tgt.shape[b]:
            raise TracegradRuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise TracegradRuntimeError("the feature number of src and tgt must be equal to "
                                        "d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)
