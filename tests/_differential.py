"""The differential harness of the adversarial first-law tests: run a program for N calls
eagerly and compiled (`tg.compile`) from the same seeds, and compare everything a user can
observe after each call: its result or error, the warnings it issued (category, message,
location), every parameter, `.grad` (None vs zeros) and `requires_grad`, state dicts of
modules, optimizers and schedulers, the RNG state. Arrays compare bit for bit, or within
`Arr.tol` (the JAX backend's float rounding).

A program is `make(comp) -> (step, objs)`: `comp` is `tg.compile` (with the backend) or the
identity, `step` a function (or a list of them) and `objs` a dict of what to snapshot;
`calls(step, objs, i)` makes call i and returns what the user gets."""
import warnings

import numpy as np

import tracegrad as tg

LOUD = "tracegrad.compile"


class Arr:
    """An array compared bit for bit (shape, dtype, bytes), or to `tol` for floats."""
    tol = 0.0

    def __init__(self, a):
        self.a = np.array(a, copy=True)

    def __eq__(self, other):
        a, b = self.a, other.a
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if Arr.tol == 0 or a.dtype.kind != "f":
            return a.tobytes() == b.tobytes()
        return bool(np.allclose(a, b, rtol=Arr.tol, atol=Arr.tol, equal_nan=True))

    def __repr__(self):
        return f"Arr({self.a!r})"


def norm(v):
    """A comparable form of a value, a state dict, or a container of them."""
    if isinstance(v, tg.Tensor):
        return ("T", v.shape, Arr(v.detach().numpy()), v.requires_grad)
    if isinstance(v, dict):
        return ("D", tuple((norm(k), norm(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(norm(x) for x in v))
    if isinstance(v, float):
        return ("f", repr(v))
    if callable(v):
        return ("fn",)
    return v


def snapshot(objs):
    """The RNG state, then per object (by name): a module's parameters (value, `.grad`,
    `requires_grad`) and state dict, an optimizer's state dict, a scheduler's state dict
    and last learning rates, anything else normalized."""
    out = [norm(tg.get_rng_state())]
    for _, o in sorted(objs.items()):
        if isinstance(o, tg.nn.Module):
            out.append([(n, norm(p), norm(p.grad), p.requires_grad)
                        for n, p in o.named_parameters()])
            out.append(norm(o.state_dict()))
        elif isinstance(o, tg.optim.Optimizer):
            out.append(norm(o.state_dict()))
        elif hasattr(o, "get_last_lr"):
            out.append((norm(o.state_dict()), norm(o.get_last_lr())))
        else:
            out.append(norm(o))
    return out


def run(make, calls, n, compiled, backend="numpy"):
    """[(result or error, warnings, state, loud)] of `n` calls, and the compiled steps'
    stats (one per step when `make` gives a list). `loud`: the compiler's own warnings."""
    tg.manual_seed(0)
    np.random.seed(0)
    comp = (lambda f: tg.compile(f, backend=backend)) if compiled else (lambda f: f)
    step, objs = make(comp)
    log = []
    for i in range(n):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                r = ("ok", norm(calls(step, objs, i)))
            except Exception as e:
                r = ("error", type(e).__name__, str(e).split("\n")[0])
        ws = [(x.category.__name__, str(x.message), x.filename, x.lineno) for x in w
              if not str(x.message).startswith(LOUD)]
        loud = [str(x.message) for x in w if str(x.message).startswith(LOUD)]
        log.append((r, ws, snapshot(objs), loud))
    steps = step if isinstance(step, (list, tuple)) else [step]
    stats = [getattr(s, "stats", None) for s in steps]
    return log, stats if isinstance(step, (list, tuple)) else stats[0]


def compare(make, calls, n=5, backend="numpy", loud=False):
    """Compiled equals eager on every call; the compiled steps' stats. `loud`: the compiled
    run may (True) or must ("must") warn that it runs eagerly; False: it must not."""
    eager, _ = run(make, calls, n, False, backend)
    compiled, stats = run(make, calls, n, True, backend)
    warned = [m for c in compiled for m in c[3]]
    if loud == "must":
        assert warned, "expected a warning that the step runs eagerly"
    elif not loud:
        assert not warned, warned
    Arr.tol = 1e-9 if backend == "jax" else 0.0
    try:
        for i, (e, c) in enumerate(zip(eager, compiled)):
            assert c[0] == e[0], f"call {i}: result"
            assert c[1] == e[1], f"call {i}: warnings"
            assert c[2] == e[2], f"call {i}: state"
    finally:
        Arr.tol = 0.0
    return stats


# -- a function called with fresh arguments: what its caller sees

def view(x):
    """What a caller sees of a value: tensors by bytes, dtype, shape, flags, version and
    a leaf's `.grad`; numpy arrays by bytes; containers item by item; anything else by its
    type and repr."""
    if isinstance(x, tg.Tensor):
        g = x.grad if x.is_leaf else None
        return ("T", x.detach().numpy().tobytes(), str(x.dtype), tuple(x.shape),
                x.requires_grad, x.grad_fn is None, x._version,
                None if g is None else g.numpy().tobytes())
    if isinstance(x, np.ndarray):
        return ("N", x.tobytes(), x.dtype.str, x.shape)
    if isinstance(x, (list, tuple)):
        return type(x).__name__, [view(v) for v in x]
    if isinstance(x, dict):
        return "dict", [(k, view(v)) for k, v in x.items()]
    return type(x).__name__, repr(x)


def records(fn, make, calls, backend="numpy", observe=None, backward=False, rng=False):
    """(eager records, compiled records, the compiled function): per call i of
    `fn(*make(i))`, `observe(args, out)` (default: the views of the output and the
    arguments after the call) or the error's type, first line and the arguments' view.
    `backward`: `.sum().backward()` of the output (its first item if a tuple) first;
    `rng`: a draw after each call records the generator as the call left it."""
    observe = observe or (lambda args, out: ("ok", view(out), view(args)))
    out = []
    for compiled in (False, True):
        f = tg.compile(fn, backend=backend) if compiled else fn
        tg.manual_seed(0)
        rec = []
        for i in range(calls):
            args = make(i)
            try:
                r = f(*args)
                if backward:
                    (r[0] if isinstance(r, tuple) else r).sum().backward()
            except Exception as e:               # noqa: BLE001 -- compared with eager's
                rec.append((type(e).__name__, str(e).split("\n")[0], view(args)))
            else:
                rec.append(observe(args, r))
            if rng:
                rec.append(tg.rand(()).item())
        out.append(rec)
    return out[0], out[1], f


def assert_same_records(eager, compiled):
    for k, (e, c) in enumerate(zip(eager, compiled)):
        assert e == c, f"record {k}: eager {e!r} != compiled {c!r}"


# -- an op table's program: compiled outputs and gradients against eager's

def assert_same_outputs_and_grads(outs, loss, args, ref_outs, ref_loss, ref_args, rtol=1e-6):
    """The compiled call's outputs (dtype, requires_grad, values to `rtol`) equal eager's;
    when eager's loss has a graph, both losses are backpropagated and every argument's
    `.grad` (None or not, values to 1e-5) equals eager's."""
    for o, r in zip(outs, ref_outs):
        assert o.dtype == r.dtype and o.requires_grad == r.requires_grad
        np.testing.assert_allclose(o.detach().numpy(), r.detach().numpy(), rtol=rtol,
                                   atol=1e-6, equal_nan=True)
    if not ref_loss.requires_grad:
        return
    loss.backward()
    ref_loss.backward()
    for a, r in zip(args, ref_args):
        assert (a.grad is None) == (r.grad is None)
        if r.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), r.grad.numpy(), rtol=1e-5, atol=1e-6)


def jax_programs_used(cf):
    """Whether every path of compiled function `cf` runs a JAX program (none fell back)."""
    from tracegrad.backends.jax.program import JaxProgram
    return all(isinstance(p.forward_program, JaxProgram) for p in cf.programs)
