"""The tracer: what gets recorded while a function runs eagerly (inputs, captured tensors,
constants, guards of every kind, in-place nodes), that user code sees exactly the eager values
while being traced, and that tensors re-wrapped by eager autograd are never mistaken for
captured constants."""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad import passes
from tracegrad.ir import interpret
from tracegrad.tracing import flatten


def _prims(g):
    return [n.prim.name for n in g.nodes]


def _guards(g):
    return [(gd.kind, gd.expected) for gd in g.guards]


def test_arguments_named_from_signature_and_outputs_flattened():
    def f(alpha, beta):
        return {"s": alpha + beta, "p": [alpha * beta]}
    g = tg.trace(f, tg.ones(2), tg.ones(2))
    assert [v.name for v in g.inputs] == ["alpha", "beta"]
    assert [v.role for v in g.inputs] == ["arg", "arg"]
    assert len(g.outputs) == 2 and _prims(g) == ["add", "mul"]


def test_closure_and_global_tensors_become_captured_inputs_not_constants():
    w = tg.full((3,), 2.0)

    def f(x):
        return x * w + GLOBAL_B
    g = tg.trace(f, tg.ones(3))
    roles = [(v.role, v.name) for v in g.inputs]
    assert roles[0] == ("arg", "x")
    assert [r for r, _ in roles[1:]] == ["captured", "captured"]
    assert "constant" not in _prims(g)


GLOBAL_B = tg.tensor([1.0, 2.0, 3.0])


def test_tensors_created_inside_are_constants():
    def f(x):
        return x + tg.tensor([1.0, 2.0]) + tg.zeros(2)
    g = tg.trace(f, tg.ones(2))
    assert len(g.inputs) == 1
    assert "constant" in _prims(g) or "full" in _prims(g)


def test_tensor_of_traced_tensors_is_recorded_not_baked():
    def f(x):
        return tg.tensor([x.sum(), x.max()]) * tg.tensor(x)[0]
    x = tg.tensor([1.0, 2.0, 3.0])
    fg = passes.functionalize(tg.trace(f, x))
    for data in ([1.0, 2.0, 3.0], [4.0, -1.0, 0.5]):
        out = interpret(fg, [np.array(data, np.float32)])[0]
        ref = f(tg.tensor(data)).numpy()
        np.testing.assert_allclose(out, ref)


@pytest.mark.parametrize("kind,fn,expected", [
    ("bool", lambda x: x * 2 if x.sum() > 0 else x, True),
    ("item", lambda x: x * x.sum().item(), 6.0),
    ("float", lambda x: x * float(x.max()), 3.0),
    ("int", lambda x: x[: int(x.sum() / 3)], 2),
    ("tolist", lambda x: x * len(x.tolist()), [1.0, 2.0, 3.0]),
])
def test_each_conversion_records_a_guard(kind, fn, expected):
    g = tg.trace(fn, tg.tensor([1.0, 2.0, 3.0]))
    assert _guards(g) == [(kind, expected)]
    assert type(g.guards[0].expected) is type(expected)
    assert g.guards[0].site.startswith(__file__)


def test_numpy_guard_and_mask_shape_guard():
    g = tg.trace(lambda x: x * float(x.numpy().sum()), tg.tensor([1.0, 2.0]))
    assert g.guards[0].kind == "numpy"
    g = tg.trace(lambda x: x[x > 1.5].sum(), tg.tensor([1.0, 2.0, 3.0]))
    assert _guards(g) == [("shape", (2,))]


def test_zero_dim_integer_index_is_guarded():
    g = tg.trace(lambda x, i: x[i] * 2, tg.ones(3), tg.tensor(1))
    assert _guards(g) == [("int", 1)]


def test_masked_assignment_guards_mask_count():
    def f(x, m, v):
        y = x.clone()
        y[m] = v
        return y
    g = tg.trace(f, tg.zeros(4), tg.tensor([True, False, True, False]), tg.ones(2))
    assert ("shape", (2, 1)) in _guards(g)


def test_tracing_sees_eager_values_and_guard_positions():
    seen = []

    def f(x):
        y = x * 3
        seen.append(y.sum().item())
        return y
    g = tg.trace(f, tg.tensor([1.0, 2.0]))
    assert seen == [9.0]
    gd = g.guards[0]
    assert gd.position == 2 and g.nodes[gd.position - 1].output is gd.value


def test_python_side_effects_run_while_tracing_only():
    calls = []

    @tg.compile
    def f(x):
        calls.append(1)
        return x + 1
    for _ in range(3):
        f(tg.ones(2))
    assert len(calls) == 1


def test_inplace_nodes_recorded_with_overwritten_operand():
    def f(x):
        y = x.clone()
        y.add_(1)
        y[0] = 5
        return y
    g = tg.trace(f, tg.zeros(3))
    assert _prims(g) == ["clone", "add_", "index_put_"]
    add = g.nodes[1]
    assert add.prim.overwrites == (0,) and add.inputs[0] is g.nodes[0].output


def test_widening_inplace_overwrites_the_target_not_a_cast():
    def f(x, y):
        z = x.clone()
        z.add_(y)
        return z
    g = tg.trace(f, tg.ones(3), tg.ones(3, dtype=tg.float64))
    assert _prims(g) == ["clone", "to_copy", "add", "copy_"]
    assert g.nodes[3].inputs[0] is g.nodes[0].output
    assert str(g.nodes[3].output.type) == "f32[3]"
    fg = passes.functionalize(g)
    out = interpret(fg, [np.ones(3, np.float32), np.full(3, 0.25)])[0]
    assert out.dtype == np.float32 and np.allclose(out, 1.25)


def test_autograd_inside_trace_reads_traced_values():
    """relu's VJP reads its saved output; eager autograd re-wraps that array, and the tracer
    must map it back to the traced value instead of capturing today's numbers."""
    def f(w, x):
        loss = (x @ w).relu().sum()
        (gw,) = tg.autograd.grad(loss, (w,))
        return gw
    w = tg.randn(3, 2, requires_grad=True)
    g = tg.trace(f, w, tg.randn(4, 3))
    assert [v.role for v in g.inputs] == ["arg", "arg"]
    fg = passes.functionalize(g)
    for _ in range(3):
        w2, x2 = tg.randn(3, 2, requires_grad=True), tg.randn(4, 3)
        out = interpret(fg, [w2.detach().numpy(), x2.numpy()])[0]
        np.testing.assert_allclose(out, f(w2, x2).numpy(), rtol=1e-6)


def test_autograd_inside_trace_reads_inplace_snapshot():
    def f(x, w):
        y = x * 2
        y.mul_(w)                   # eager saves a copy of the old y for w's gradient
        return tg.autograd.grad(y.sum(), (x, w))
    x, w = tg.randn(3, requires_grad=True), tg.randn(3, requires_grad=True)
    g = tg.trace(f, x, w)
    assert len(g.inputs) == 2 and "clone" in _prims(g)
    g.verify()
    fg = passes.functionalize(g)
    for _ in range(3):
        x2, w2 = tg.randn(3, requires_grad=True), tg.randn(3, requires_grad=True)
        outs = interpret(fg, [x2.detach().numpy(), w2.detach().numpy()])
        for o, r in zip(outs, f(x2, w2)):
            np.testing.assert_allclose(o, r.numpy(), rtol=1e-6)


def test_flatten_round_trips_nested_structures():
    obj = {"a": (1, [2, 3]), "b": {"c": 4}}
    leaves, build = flatten(obj)
    assert leaves == [1, 2, 3, 4]
    assert build([10, 20, 30, 40]) == {"a": (10, [20, 30]), "b": {"c": 40}}


def test_trace_with_kwargs_and_no_tensor_output():
    def f(x, scale=1.0):
        return x * scale
    g = tg.trace(f, tg.ones(2), scale=3.0)
    assert len(g.inputs) == 1 and g.nodes[0].inputs[1] == 3.0


def test_random_draws_are_ops_with_generator_operand():
    g = tg.trace(lambda x: x * tg.rand(x.shape), tg.ones(3))
    assert "rand" in _prims(g)
    assert g.nodes[0].prim.impure
