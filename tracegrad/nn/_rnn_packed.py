"""One direction of one recurrent layer over a packed sequence (Note [Packed layout] in
`nn/utils/_packed.py`): the rows of `data` for step t are the `sizes[t]` sequences still
running, longest first, so the running batch only shrinks (forward) or grows (reverse).

Forward in time, the state keeps the rows of the running sequences; when the batch
shrinks at step t, the rows [sizes[t]:] have just taken their last true step and are set
aside as final states. Backward in time, each sequence starts from its initial state at its
own last step: when the batch grows at step t, the new rows join from `h0` (and `c0`).
Either way the final state of every sequence is its state after its true last step (or its
first, in reverse), which is what PyTorch returns as `h_n`/`c_n`, and output row r of step t
is the new h of sequence r. Only slices and concatenations of whole blocks, so the loop
differentiates, traces (one unrolled path per `batch_sizes`) and runs on the JAX backend.
"""
from ..ops import shape as S
from . import functional as F
from ._rnn_cells import rnn_step


def packed_direction(mode, weights, x, sizes, state, reverse):
    """Run one direction over packed rows `x` (sum(sizes), in) from `state` (h, or [h, c]
    for an LSTM, each (sizes[0], *)). Returns (output rows (sum(sizes), H_out), final
    state with the same structure as `state`)."""
    w_ih, w_hh, b_ih, b_hh, w_hr = weights
    xw = F.linear(x, w_ih, b_ih)                       # all time steps in one matmul
    lstm = mode == "LSTM"
    parts = list(state) if lstm else [state]
    offsets = [0]
    for n in sizes:
        offsets.append(offsets[-1] + n)
    outs = [None] * len(sizes)

    def step(t, cur):
        n = sizes[t]
        rows = xw if n == xw.shape[0] else xw[offsets[t]:offsets[t] + n]
        new = rnn_step(mode, rows, tuple(cur) if lstm else cur[0], w_hh, b_hh, w_hr)
        new = list(new) if lstm else [new]
        outs[t] = new[0]
        return new

    if not reverse:
        cur, done = parts, []
        for t, n in enumerate(sizes):
            if n < cur[0].shape[0]:                    # rows [n:] have finished
                done.append([p[n:] for p in cur])
                cur = [p[:n] for p in cur]
            cur = step(t, cur)
        final = [S.cat([c] + [d[i] for d in reversed(done)], 0) if done else c
                 for i, c in enumerate(cur)]
    else:
        last = sizes[-1]
        cur = [p[:last] if last < p.shape[0] else p for p in parts]
        for t in range(len(sizes) - 1, -1, -1):
            have, n = cur[0].shape[0], sizes[t]
            if n > have:                               # rows [have:n] start here
                cur = [S.cat([c, p[have:n]], 0) for c, p in zip(cur, parts)]
            cur = step(t, cur)
        final = cur
    out = outs[0] if len(outs) == 1 else S.cat(outs, 0)
    return out, (tuple(final) if lstm else final[0])
