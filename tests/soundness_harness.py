"""The compiled == eager harness of the soundness tests (issue 10).

`check_same(fn, make_state, calls=4)` builds the state of one program twice, from the same
seeds, runs it eagerly on one copy and through `tracegrad.compile` on the other, over several
calls whose inputs and state change between calls, and compares everything a user can see:
outputs (values, dtype, shape, structure, requires_grad, is_leaf, grad_fn present, fresh
objects), the raised exception type, `.grad` of every leaf reached from the state and the
arguments after a backward through the outputs, in-place effects on inputs and state, and
whatever the state's `observe()` reports (hook logs, Python lists). With `torch=True` the same
program also runs on PyTorch (the oracle) and the eager record must equal PyTorch's.

The state protocol (a `State`, built by `make_state(env)`):
- `env.compile` is `tracegrad.compile` (compiled run) or the identity (eager/torch runs);
  `env.lib` is `tracegrad` or `torch`; `env.tensor(array, requires_grad=False)` builds one.
- `s.fn`: the program when `fn` is None; `s.call`: a ready callable (already compiled by the
  state itself, e.g. a decorated method) that the harness calls as-is.
- `s.args(i) -> (args, kwargs)` fresh inputs for call i (default: no arguments);
- `s.before(i)`: mutate the state before call i; `s.observe()`: extra Python observables;
- `s.backward(i, out)`: replace the default backward (sum of weighted float outputs).
"""
import dataclasses
import linecache
import random
import re
import types
import warnings

import numpy as np

import tracegrad as tg


class State(types.SimpleNamespace):
    """A program's state (see the module docstring)."""


class Env:
    def __init__(self, lib, compiled):
        self.lib, self.compiled = lib, compiled
        self.compile = tg.compile if compiled else _identity_compile
        self.is_torch = lib is not tg

    def tensor(self, a, requires_grad=False, dtype=None):
        a = np.asarray(a)
        if a.dtype == np.float64 and dtype is None:
            a = a.astype(np.float32)
        t = self.lib.tensor(a, dtype=dtype)
        return t.requires_grad_(True) if requires_grad else t

    def randn(self, *shape, seed=0, requires_grad=False):
        return self.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad)


def init_params(env, module, seed=3):
    """Deterministic parameters (the same under tracegrad and PyTorch)."""
    rng = np.random.default_rng(seed)
    with env.lib.no_grad():
        for p in module.parameters():
            p.copy_(env.tensor(rng.uniform(-0.6, 0.6, tuple(p.shape))))
    return module


def _identity_compile(fn=None, **_):
    return fn if fn is not None else (lambda f: f)


def is_tensor(x):
    return type(x).__name__ in ("Tensor", "Parameter") and hasattr(x, "requires_grad")


def _arr(t):
    return np.array(t.detach().numpy(), copy=True)


def _walk(obj, path, out, seen, depth=0):
    """(path, tensor) for every tensor reachable from obj (modules, containers, objects)."""
    if id(obj) in seen or depth > 5:
        return
    seen.add(id(obj))
    if is_tensor(obj):
        out.append((path, obj))
        return
    if hasattr(obj, "named_parameters") and hasattr(obj, "modules"):
        for n, p in obj.named_parameters():
            _walk(p, f"{path}.{n}", out, seen, depth + 1)
        for n, b in obj.named_buffers():
            _walk(b, f"{path}.{n}", out, seen, depth + 1)
    if isinstance(obj, dict):
        for n, (k, v) in enumerate(list(obj.items())):
            label = repr(k) if isinstance(k, (str, int)) else f"#{n}"
            _walk(v, f"{path}[{label}]", out, seen, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for k, v in enumerate(obj):
            _walk(v, f"{path}[{k}]", out, seen, depth + 1)
    elif isinstance(obj, np.ndarray) or callable(obj) and not hasattr(obj, "parameters"):
        return
    elif hasattr(obj, "__dict__") and not isinstance(obj, (type, types.ModuleType)):
        for k, v in list(vars(obj).items()):
            if not k.startswith("__") and k not in ("call", "fn"):
                _walk(v, f"{path}.{k}", out, seen, depth + 1)


def _describe_tensor(t, grads=True, versions=False):
    d = {"value": _arr(t), "dtype": str(t.dtype).replace("torch.", ""),
         "requires_grad": t.requires_grad, "is_leaf": t.is_leaf,
         "is_inference": t.is_inference()}
    if grads:
        g = t.grad if t.is_leaf or _retains(t) else None
        d["grad"] = None if g is None else _arr(g)
    if versions:
        d["_version"] = t._version
    return d


def _retains(t):
    try:
        return t.retains_grad
    except AttributeError:
        return False


def describe_out(x, previous, versions=False):
    """A comparable description of an output structure (tensors described by value)."""
    if is_tensor(x):
        d = _describe_tensor(x, grads=False, versions=versions)
        d["has_grad_fn"] = x.grad_fn is not None
        return ("tensor", d)
    if x is None or isinstance(x, (bool, int, float, str, complex)):
        return ("scalar", type(x).__name__, x)
    if isinstance(x, np.ndarray):
        return ("ndarray", x.copy())
    fresh = not any(x is p for p in previous)
    previous.append(x)
    kind = "Size" if type(x).__name__ == "Size" else type(x).__name__
    if kind == "Size":
        return ("Size", tuple(int(v) for v in x))
    if isinstance(x, dict):
        return ("dict", fresh, [(k, describe_out(v, previous, versions)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (kind, fresh, [describe_out(v, previous, versions) for v in x])
    if dataclasses.is_dataclass(x):
        return (kind, fresh, [(f.name, describe_out(getattr(x, f.name), previous, versions))
                              for f in dataclasses.fields(x)])
    if hasattr(x, "__dict__"):
        return (kind, fresh, [(k, describe_out(v, previous, versions))
                              for k, v in vars(x).items()])
    return ("other", kind, repr(x))


def out_tensors(x, acc=None, seen=None):
    acc = [] if acc is None else acc
    seen = set() if seen is None else seen
    if id(x) in seen:
        return acc
    seen.add(id(x))
    if is_tensor(x):
        acc.append(x)
    elif isinstance(x, dict):
        for v in x.values():
            out_tensors(v, acc, seen)
    elif isinstance(x, (list, tuple)):
        for v in x:
            out_tensors(v, acc, seen)
    elif dataclasses.is_dataclass(x) or (hasattr(x, "__dict__") and not callable(x)
                                         and not isinstance(x, types.ModuleType)):
        for v in vars(x).values():
            out_tensors(v, acc, seen)
    return acc


def default_backward(env, out):
    """Backward through a weighted sum of the floating outputs that require grad."""
    loss = None
    for t in out_tensors(out):
        if t.requires_grad and "float" in str(t.dtype):
            w = env.tensor(np.linspace(0.5, 1.5, max(t.numel(), 1)).reshape(tuple(t.shape)))
            term = (t * w.to(t.dtype)).sum()
            loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()


def _exc(e):
    name = type(e).__name__
    # tracegrad's error family subclasses the builtin PyTorch raises: compare that builtin
    for base in type(e).__mro__:
        if base.__module__ == "builtins" and base is not Exception:
            return base.__name__
    return name


def run(fn, make_state, env, calls, versions=False, seed=0):
    """Run one copy of the program; return its record (a list of (label, value))."""
    tg.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    if env.is_torch:
        env.lib.manual_seed(seed)
    s = make_state(env)
    if getattr(s, "call", None) is None:
        s.call = env.compile(fn if fn is not None else s.fn)
    record, previous = [], []
    for i in range(calls):
        if hasattr(s, "before"):
            s.before(i)
        args, kwargs = s.args(i) if hasattr(s, "args") else ((), {})
        try:
            out = s.call(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the exception type is what we compare
            record.append((f"call {i}: raised", _exc(e)))
            continue
        record.append((f"call {i}: output", describe_out(out, previous, versions)))
        try:
            if hasattr(s, "backward"):
                s.backward(i, out)
            else:
                default_backward(env, out)
            record.append((f"call {i}: backward", "ok"))
        except Exception as e:  # noqa: BLE001
            record.append((f"call {i}: backward raised", _exc(e)))
        found = []
        _walk((args, kwargs), "args", found, set())
        _walk(s, "state", found, set())
        for t in out_tensors(out):
            if _retains(t):
                found.append(("retained output", t))
        for path, t in found:
            record.append((f"call {i}: {path}", _describe_tensor(t, versions=versions)))
        if hasattr(s, "observe"):
            record.append((f"call {i}: observe()", s.observe()))
    return record


def _same(a, b, loose=False):
    """Equal as a user sees it. `loose`: against PyTorch, whose float32 libm differs from
    numpy's in the last bit, which a saturating function turns into a few percent of a tiny
    gradient (`1 - tanh(x)**2` near 1): tolerances ten times wider, compiled vs eager stay
    tight."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        if a.shape != b.shape:
            return False
        if a.dtype.kind == "f" or b.dtype.kind == "f":
            # (the sign of a zero is not compared: +-0.0 gradients are not observable
            # except through 1/x, which the values then show as +-inf)
            # absolute tolerance relative to the array's largest magnitude: float32 sums
            # of terms near 75 that cancel to ~1 carry errors near 1e-4 (summation order)
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            finite = np.abs(a64[np.isfinite(a64)])
            scale = max(1.0, float(finite.max())) if finite.size else 1.0
            widen = 10 if loose else 1
            return np.allclose(a64, b64, rtol=1e-4 * widen, atol=1e-5 * widen * scale,
                               equal_nan=True)
        return np.array_equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], loose) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y, loose) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        if a == b:                           # -0.0 and 0.0 stay apart (1/x tells them apart)
            return bool(np.signbit(a) == np.signbit(b))
        # values a program rounded (`round(x, 4)`) may land either side of a boundary
        return (a != a and b != b) or abs(a - b) <= 1e-4 * max(1.0, abs(a)) + 1e-4
    return type(a) is type(b) and a == b


def first_difference(want, got, loose=False):
    """None, or a readable description of the first differing entry (`loose`: see _same)."""
    for k in range(max(len(want), len(got))):
        if k >= len(want) or k >= len(got):
            extra = got[k] if k < len(got) else want[k]
            return f"records differ in length; first unmatched entry: {extra!r}"
        (lw, w), (lg, g) = want[k], got[k]
        if lw != lg or not _same(w, g, loose):
            return f"entry {k}:\n  expected {lw}: {w!r}\n  got      {lg}: {g!r}"
    return None


def check_same(fn, make_state, calls=4, torch=False, versions=False, allow_warning=None):
    """Assert that compiling `fn` (or `s.fn`) changes nothing a user can see (see above).

    `allow_warning`: a source line number; a compiled run that differs from eager is then
    accepted only if a UserWarning naming that line was issued (Python side effects)."""
    eager = run(fn, make_state, Env(tg, False), calls, versions)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = run(fn, make_state, Env(tg, True), calls, versions)
    diff = first_difference(eager, compiled)
    if diff is not None and allow_warning is not None:
        named = [w for w in caught if issubclass(w.category, UserWarning)
                 and re.search(rf"\b{allow_warning}\b", str(w.message))]
        assert named, (f"compiled differs from eager and no UserWarning names line "
                       f"{allow_warning}:\n{diff}\nwarnings: {[str(w.message) for w in caught]}")
    else:
        assert diff is None, f"compiled differs from eager:\n{diff}"
    if torch:
        import pytest
        torch_mod = pytest.importorskip("torch")
        oracle = run(fn, make_state, Env(torch_mod, False), calls, versions)
        diff = first_difference(oracle, eager, loose=True)
        assert diff is None, f"eager tracegrad differs from PyTorch:\n{diff}"
    return eager


def line_of(marker, path):
    """The line number in `path` of the line ending with the comment `# <marker>`."""
    for k, line in enumerate(linecache.getlines(path), 1):
        if line.rstrip().endswith(f"# {marker}"):
            return k
    raise LookupError(marker)
