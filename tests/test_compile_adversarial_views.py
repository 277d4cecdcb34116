"""Views, aliasing and in-place ops, run eagerly, compiled (numpy and JAX backends) and in
PyTorch: what a caller sees of outputs that alias inputs, of writes through views, and of
in-place operands that overlap the written memory must agree. Each test is a divergence an
adversarial review found, minimized."""
import numpy as np
import pytest

import tracegrad as tg
from _differential import assert_same_records, records

BACKENDS = ["numpy", "jax"]


def _backend(name):
    if name == "jax":
        pytest.importorskip("jax")
    return name


def _err(e):
    """An error as a comparable (builtin type, message without tracegrad's op prefix)."""
    builtin = next(c for c in type(e).__mro__ if c.__module__ == "builtins")
    msg = str(e).split("\n")[0]
    return builtin.__name__, msg.split(": ", 1)[1] if ": unsupported" in msg else msg


# -- Note [Overlapping in-place operands] (tracegrad/_overlap.py) --

def _set(key, value):
    """`x[key] = value(x)`; a callable `key` is computed from `x` (a mask)."""
    def f(x):
        x[key(x) if callable(key) else key] = value(x)
    return f


OVERLAPS = {            # in-place writes reading the memory they write
    "add_t": lambda x: x.add_(x.t()),
    "iadd_T": lambda x: x.__iadd__(x.T),
    "t_target": lambda x: x.t().add_(x),
    "mul_row_broadcast": lambda x: x.mul_(x[0]),
    "sub_shifted_rows": lambda x: x[1:].sub_(x[:-1]),
    "copy_t": lambda x: x.copy_(x.t()),
    "copy_shifted_in_row": lambda x: x[0, 1:].copy_(x[0, :-1]),
    "setitem_shifted_rows": _set(slice(1, None), lambda x: x[:-1]),
    "pow_t": lambda x: x.pow_(x.t()),
    "adv_setitem_row": _set([0, 1], lambda x: x[2]),
    "adv_setitem_self": _set([0, 1, 2, 3], lambda x: x),
    "mask_setitem_row": _set(lambda x: x[:, 0] > 5, lambda x: x[0]),
    "scatter_self": lambda x: x.scatter_(0, x.new_zeros((1, 4)).long(), x[1:2]),
    "scatter_add_self": lambda x: x.scatter_add_(0, x.new_zeros((1, 4)).long(), x[1:2]),
    "index_add_self": lambda x: x.index_add_(0, x.new_zeros(1).long(), x[1:2]),
    "scatter_reduce_self": lambda x: x.scatter_reduce_(0, x.new_zeros((4, 4)).long(), x,
                                                       "sum"),
    "scatter_reduce_row": lambda x: x.scatter_reduce_(0, x.new_zeros((1, 4)).long(),
                                                      x[1:2], "amax"),
}
ALLOWED = {             # the same memory, but PyTorch allows it
    "add_self": lambda x: x.add_(x),
    "add_same_block": lambda x: x.add_(x.view(16).view(4, 4)),
    "t_both": lambda x: x.t().add_(x.t()),
    "copy_self": lambda x: x.copy_(x),
    "copy_expanded": lambda x: x.copy_(x[0].expand(4, 4)),
    "mul_disjoint_row": lambda x: x[:3].mul_(x[3]),
    "setitem_disjoint_row": _set(0, lambda x: x[1]),
    "setitem_disjoint_halves": _set(slice(None, 2), lambda x: x[2:]),
    "setitem_same_row": _set(0, lambda x: x[0]),
    "setitem_interleaved": _set(slice(None, None, 2), lambda x: x[1::2]),
    "masked_fill_own_element": lambda x: x.masked_fill_(x > 5, x[0, 0]),
    "mask_setitem_own_element": _set(lambda x: x > 5, lambda x: x[0, 0]),
    "fill_own_element": lambda x: x.fill_(x[0, 0]),
}


def _run(module, fn):
    x = module.arange(16.0).reshape(4, 4)
    try:
        fn(x)
    except Exception as e:                    # noqa: BLE001 -- compared with PyTorch's
        return _err(e)
    return x.tolist()


@pytest.mark.parametrize("name", sorted(OVERLAPS) + sorted(ALLOWED))
def test_overlapping_in_place_operands_as_pytorch(name):
    torch = pytest.importorskip("torch")
    fn = {**OVERLAPS, **ALLOWED}[name]
    got, want = _run(tg, fn), _run(torch, fn)
    assert got == want
    assert (name in OVERLAPS) == (got[0] == "RuntimeError")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["add_t", "setitem_shifted_rows", "mul_row_broadcast",
                                  "adv_setitem_row", "setitem_disjoint_row", "copy_self"])
def test_overlapping_in_place_operands_compiled_as_eager(name, backend):
    fn = {**OVERLAPS, **ALLOWED}[name]

    def f(x):
        fn(x)
        return x * 2

    def make(i):
        return (tg.arange(16.0).reshape(4, 4) * (i + 1),)

    eager, compiled, _ = records(f, make, 4, _backend(backend))
    assert_same_records(eager, compiled)


@pytest.mark.parametrize("backend", BACKENDS)
def test_overlap_verdict_follows_the_layout_of_a_non_contiguous_argument(backend):
    # both arguments are 3x3 and not C-contiguous (one entry key); x.t() overlaps x
    # partially only when x is one dense block (the transposed one), so eager raises on
    # every other call and the compiled program must not skip that check
    def f(x):
        x.add_(x.t())
        return x.sum()

    def make(i):
        if i % 2 == 0:
            return (tg.arange(18.0).reshape(3, 6)[:, ::2],)
        return (tg.arange(9.0).reshape(3, 3).t(),)

    eager, compiled, _ = records(f, make, 4, _backend(backend))
    assert eager[1][0] == "TracegradRuntimeError"
    assert_same_records(eager, compiled)


# -- Note [Bases of returned views] (compiler/trace_settle.py) --

def _aliases(args, out):
    """What a caller sees of returned views: per output its values, `_base` being set,
    version and flags; then, after writing through the first output under no_grad, every
    output and argument again (a write shows through whatever shares the memory), and
    the gradient of a weighted sum of the outputs requiring grad."""
    outs = list(out) if isinstance(out, (tuple, list)) else [out]

    def seen():
        return [(o.tolist(), o.requires_grad, o._version) for o in outs] + [
            (a.tolist(), a._version) for a in args]
    before = seen() + [o._base is not None for o in outs]
    with tg.no_grad():
        outs[0].add_(100.0)
    after = seen()
    grads = [o for o in outs if o.requires_grad]
    if grads:
        sum((o * (k + 2)).sum() for k, o in enumerate(grads)).backward()
    return before, after, [None if a.grad is None else a.grad.tolist() for a in args]


VIEWS_OF_AN_INTERMEDIATE = {
    "overlapping_rows": lambda x: (lambda y: (y[1:], y[:2]))(x * 2),
    "row_and_transpose": lambda x: (lambda y: (y[0], y.t()))(x * 2),
    "unbind": lambda x: (x * 2).unbind(1),
    "view_before_its_base": lambda x: (lambda y: (y[1], y))(x + 1),
    "view_of_a_view": lambda x: (lambda y: (y[1:][0], y[1:]))(x * 3),
    "one_view": lambda x: (x * 2)[1:],
    "views_of_a_detached_result": lambda x: (lambda y: (y[0], y[1:]))((x * 2).detach()),
    "view_of_input_and_of_result": lambda x: ((x * 2)[1:], x[0]),
    "nested_containers": lambda x: (lambda y: [y[0], {"a": y[1:]}])(x * 2),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("name", sorted(VIEWS_OF_AN_INTERMEDIATE))
def test_views_of_one_result_share_its_memory_as_in_eager(name, grad, backend):
    fn = VIEWS_OF_AN_INTERMEDIATE[name]

    def make(i):
        x = tg.arange(12.0).reshape(3, 4) * (i + 1) + 0.5
        return (x.requires_grad_(grad),)

    def f(x):
        out = fn(x)
        return tuple(out[:1]) + (out[1]["a"],) if name == "nested_containers" else out

    eager, compiled, _ = records(f, make, 4, _backend(backend), observe=_aliases)
    assert_same_records(eager, compiled)


def test_view_of_a_result_writes_into_its_sibling_view():
    f = tg.compile(lambda x: (lambda y: (y[1:], y[:2]))(x * 2))
    for _ in range(3):
        a, b = f(tg.ones(3, 2))
        a[0].fill_(7.0)                       # row 1 of the hidden result: b's second row
        assert b.tolist() == [[2.0, 2.0], [7.0, 7.0]]
        assert a._base is b._base is not None and a._version == b._version == 1


# -- diagonal as a view (ops/diagonal_view.py) --

DIAGONALS = [(0, 0, 1), (1, 0, 1), (-1, 0, 1), (5, 0, 1), (1, -1, 0), (0, 2, 0), (-2, 1, 2)]


@pytest.mark.parametrize("offset,dim1,dim2", DIAGONALS)
def test_diagonal_is_the_view_pytorch_returns(offset, dim1, dim2):
    torch = pytest.importorskip("torch")
    got, want = tg.arange(24.0).reshape(2, 3, 4), torch.arange(24.0).reshape(2, 3, 4)
    dg, dw = got.diagonal(offset, dim1, dim2), want.diagonal(offset, dim1, dim2)
    assert dg.tolist() == dw.tolist()
    assert (dg.shape, dg.stride(), dg.storage_offset()) == (
        tuple(dw.shape), dw.stride(), dw.storage_offset())
    assert dg._is_view() and dw._is_view()
    dg.mul_(-1)                               # writes into the input, bumps its version
    dw.mul_(-1)
    assert got.tolist() == want.tolist() and got._version == want._version == 1


@pytest.mark.parametrize("offset,dim1,dim2", DIAGONALS)
def test_diagonal_gradients_of_first_and_second_order(offset, dim1, dim2):
    x = tg.tensor(np.random.default_rng(0).standard_normal((2, 3, 4)), requires_grad=True)
    w = tg.tensor(np.random.default_rng(1).standard_normal((2, 3, 4)))

    def f(x):
        return ((x * w).diagonal(offset, dim1, dim2) ** 2).sum()
    assert tg.autograd.gradcheck(f, (x,))
    assert tg.autograd.gradgradcheck(f, (x,))


def test_diagonal_errors_as_pytorch():
    torch = pytest.importorskip("torch")
    for module in (tg, torch):
        with pytest.raises(RuntimeError, match="diagonal dimensions cannot be identical 1, 1"):
            module.ones(3, 3).diagonal(0, 1, 1)
        with pytest.raises(IndexError, match="Dimension out of range"):
            module.ones(3).diagonal()


@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((7, 3), True), ((7, 3), False),
                                        ((4, 3), True), ((3, 5), True), ((3, 3, 3), False)])
def test_fill_diagonal_as_pytorch(shape, wrap):
    torch = pytest.importorskip("torch")
    got, want = tg.zeros(*shape), torch.zeros(*shape)
    assert got.fill_diagonal_(2.5, wrap=wrap) is got
    want.fill_diagonal_(2.5, wrap=wrap)
    assert got.tolist() == want.tolist()
    for module in (tg, torch):
        with pytest.raises(RuntimeError, match="all dimensions of input must be of equal"):
            module.zeros(3, 3, 2).fill_diagonal_(1.0)


DIAGONAL_PROGRAMS = {
    "returned_view": lambda x: x.diagonal(),
    "copy_into_diagonal": lambda x: (lambda y: (y.diagonal().copy_(x[0, :3] * 2), y)[1])(
        x.clone()),
    "fill_diagonal_of_a_result": lambda x: (x * 2).fill_diagonal_(0.0),
    "diagonal_of_a_result_and_the_result": lambda x: (lambda y: (y.diagonal(1), y))(x + 1),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("name", sorted(DIAGONAL_PROGRAMS))
def test_diagonal_programs_compiled_as_eager(name, grad, backend):
    fn = DIAGONAL_PROGRAMS[name]

    def make(i):
        x = tg.arange(12.0).reshape(3, 4) * (i + 1) + 0.5
        return (x.requires_grad_(grad),)

    eager, compiled, _ = records(fn, make, 4, _backend(backend), observe=_aliases)
    assert_same_records(eager, compiled)


# -- index_put_, index_fill_, index_copy_ (ops/index_writes.py) --

def _index_writes(m):
    """(name, fn(x, v)) pairs written the same for tracegrad and PyTorch (`m`)."""
    i = m.tensor([0, 2, 0])
    return {
        "put": lambda x, v: x.index_put_((i,), v[:1]),
        "put_accumulate_repeats": lambda x, v: x.index_put_((i, i), v[:3], accumulate=True),
        "put_accumulate_rows": lambda x, v: x.index_put_((i,), v, accumulate=True),
        "put_accumulate_mask": lambda x, v: x.index_put_((x > 4,), v[0], accumulate=True),
        "put_out_of_place": lambda x, v: x.index_put((i, m.tensor([1, 1, 3])), v[:3] * 2,
                                                     accumulate=True),
        "fill": lambda x, v: x.index_fill_(1, m.tensor([3, 0]), -1.5),
        "fill_tensor": lambda x, v: x.index_fill_(0, m.tensor([1]), v[2]),
        "copy": lambda x, v: x.index_copy_(1, m.tensor([3, 1]), v[:2].t().expand(3, 2) * 1),
        "copy_out_of_place": lambda x, v: x.index_copy(0, m.tensor([2, 0]),
                                                       v.expand(2, 4) * 1),
    }


@pytest.mark.parametrize("name", sorted(_index_writes(tg)))
def test_index_writes_as_pytorch_with_gradients(name):
    torch = pytest.importorskip("torch")
    res = []
    for m in (tg, torch):
        x = m.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4), requires_grad=True)
        v = m.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        y = _index_writes(m)[name](x * 1, v)
        (y * m.arange(12.0).reshape(3, 4)).sum().backward()
        res.append((y.tolist(), x.grad.tolist(),
                    None if v.grad is None else v.grad.tolist()))
    assert res[0] == res[1]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(_index_writes(tg)))
def test_index_writes_compiled_as_eager(name, backend):
    fn = _index_writes(tg)[name]

    def f(x, v):
        return fn(x * 1, v)

    def make(i):
        return ((tg.arange(12.0).reshape(3, 4) * (i + 1)).requires_grad_(),
                tg.tensor([1.0, 2.0, 3.0, 4.0]) - i)

    eager, compiled, _ = records(f, make, 4, _backend(backend), backward=True)
    assert_same_records(eager, compiled)


def test_index_put_accumulate_second_order_gradients():
    x = tg.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
    v = tg.tensor(np.random.default_rng(1).standard_normal(3), requires_grad=True)
    i = tg.tensor([0, 2, 0])

    def f(x, v):
        return ((x * 1).index_put_((i, i), v * v, accumulate=True) ** 2).sum()
    assert tg.autograd.gradcheck(f, (x, v))
    assert tg.autograd.gradgradcheck(f, (x, v))


def test_index_put_refuses_values_of_another_dtype_as_pytorch():
    torch = pytest.importorskip("torch")
    for m in (tg, torch):
        with pytest.raises(RuntimeError, match="Index put requires the source and destination "
                           "dtypes match, got Float for the destination and Double"):
            m.zeros(3).index_put_((m.tensor([0]),), m.tensor([1.0], dtype=m.float64))


# -- Note [Multi-output views] (ops/shape.py) --

MULTI_OUTPUT_WRITES = {
    "unbind": lambda y: y.unbind(0)[1].add_(1),
    "chunk": lambda y: y.chunk(2)[1].mul_(2),
    "chunk_into_one": lambda y: y.chunk(1)[0].add_(1),
    "split": lambda y: y.split(2, 1)[0].mul_(2),
    "split_with_sizes": lambda y: y.split([1, 3])[1].sub_(1),
    "view_of_an_output": lambda y: y.unbind(0)[1][0].add_(1),
    "transposed_output": lambda y: y.chunk(2)[0].t().add_(1),
    "iterating": lambda y: [row.mul_(2) for row in y],
    "base_without_grad": lambda y: y.detach().unbind(0)[1].add_(1),
}


def _multi(module, name, leaf=False):
    x = module.ones(4, 4, requires_grad=True)
    try:
        MULTI_OUTPUT_WRITES[name](x if leaf else x * 1)
    except RuntimeError as e:
        return str(e).split("\n")[0].split("_: ", 1)[-1]
    return "ok"


@pytest.mark.parametrize("name", sorted(MULTI_OUTPUT_WRITES))
def test_in_place_write_into_a_multi_output_view_as_pytorch(name):
    torch = pytest.importorskip("torch")
    assert _multi(tg, name) == _multi(torch, name)
    assert (_multi(tg, name) == "ok") == (name == "base_without_grad")
    if name == "unbind":                      # before "a view of a leaf Variable ..."
        assert _multi(tg, name, leaf=True) == _multi(torch, name, leaf=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_write_into_a_multi_output_view_compiled_as_eager(backend):
    def f(x):
        q, k = (x * 2).chunk(2)
        if x.requires_grad:
            return q * k
        q.mul_(3)
        return q * k

    def make(i):
        return (tg.arange(8.0).reshape(4, 2).requires_grad_(i % 2 == 0),)

    eager, compiled, _ = records(f, make, 4, _backend(backend))
    assert eager[0][0] == "ok" and eager[1][0] == "ok"
    assert_same_records(eager, compiled)

    def g(x):
        q, k = (x * 2).chunk(2)
        q.mul_(3)
        return q * k

    eager, compiled, _ = records(g, make, 4, _backend(backend))
    assert eager[0][0] == "InplaceError" and eager[1][0] == "ok"
    assert_same_records(eager, compiled)


# -- out= (ops/out_arg.py) --

OUT_CALLS = {
    "into_a_fresh_tensor": lambda m, x: m.add(x, 1.0, out=m.empty(4)),
    "into_the_next_row": lambda m, x: m.add(x.view(2, 4)[0], 1.0, out=x.view(2, 4)[1]),
    "into_the_input": lambda m, x: m.mul(x, x, out=x),
    "overlapping_the_input": lambda m, x: m.add(x[1:5], 1.0, out=x[:4]),
    "input_requires_grad": lambda m, x: m.add(x.requires_grad_(), 1.0, out=m.empty(8)),
    "result_narrowed_to_int": lambda m, x: m.add(x, 1.0, out=m.zeros(8, dtype=m.int64)),
    "int_result_widened": lambda m, x: m.add(x.long(), 1, out=m.zeros(8)),
    "empty_resized": lambda m, x: m.mul(x, 2.0, out=m.empty(0)),
    "matmul": lambda m, x: m.matmul(x.view(2, 4), x.view(4, 2), out=m.ones(2, 2)),
    "cat": lambda m, x: m.cat([x, x], out=m.empty(16)),
    "zeros": lambda m, x: m.zeros(4, out=x[2:6]),
    "ones_resized": lambda m, x: m.ones(2, 2, out=m.empty(0)),
}


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
@pytest.mark.parametrize("name", sorted(OUT_CALLS))
def test_out_argument_as_pytorch(name):
    torch = pytest.importorskip("torch")
    res = []
    for m in (tg, torch):
        x = m.arange(8.0)
        try:
            r = OUT_CALLS[name](m, x)
        except RuntimeError as e:                 # tracegrad's messages start "op: "
            msg = str(e).split("\n")[0]
            res.append(msg.split(": ", 1)[1] if m is tg else msg)
        else:
            res.append((r.tolist(), str(r.dtype).split(".")[-1], r._version, x.tolist()))
    assert res[0] == res[1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_argument_compiled_as_eager(backend):
    def f(x, y):
        tg.add(x[0], y, out=x[1])
        tg.mul(x[2:], 2.0, out=x[:2]) if y[0] > 100 else None
        return tg.mul(x, y, out=tg.empty(3, 4))

    def make(i):
        return tg.arange(12.0).reshape(3, 4) * (i + 1), tg.arange(4.0) + 50 * i

    eager, compiled, _ = records(f, make, 4, _backend(backend))
    assert_same_records(eager, compiled)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key", [1, slice(1, None), (Ellipsis, 0), [0, 2], "mask"])
def test_item_assignment_into_a_leaf_names_the_view_as_pytorch(key, backend):
    torch = pytest.importorskip("torch")

    def f(m):
        def g(x):
            x[x > 1 if isinstance(key, str) else key] = 0.0
            return x * 2
        return g

    msgs = []
    for m, run in ((torch, f(torch)), (tg, f(tg)), (tg, tg.compile(f(tg), backend=backend))):
        for _ in range(2):
            with pytest.raises(RuntimeError) as e:
                run(m.ones(3, 3, requires_grad=True))
            msgs.append(str(e.value).split("\n")[0].split("_: ", 1)[-1].split(" Wrap")[0])
    assert len(set(msgs)) == 1, msgs
