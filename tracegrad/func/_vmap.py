"""`vmap`: torch.func.vmap's semantics for pure functions, by running the function once per
batch element and stacking the results.

Note [vmap by looping]
tracegrad has no batching rules. `vmap(f)(x)` calls `f` on `x.select(in_dim, i)` for each
`i` and stacks the outputs at `out_dims`; that is exact for any function whose output for an
element depends only on that element (what vmap means), and differentiable (select and stack
are). `f` is `tracegrad.compile`d (cached per function and `randomness`), so the elements after
the first run one generated program each (`vmapped.compiled.stats`).

Where looping would silently differ from torch, it raises instead:
- randomness='error' (the default): a random draw inside `f` raises torch's error.
  'different' draws anew per element (a different stream than torch's); 'same' restores the
  generator before each element so all elements see the same draws.
- An in-place update of a tensor that is not batched (an `in_dims=None` argument, or a tensor
  `f` captures: its closure, the globals it names, a module's parameters and buffers) would
  run once per element here, where torch raises (a batched value written into an unbatched
  tensor) or runs it once. It raises TracegradRuntimeError after the first element (which has
  already applied it once). In-place updates of the batched inputs write through the views
  into the caller's tensors, as in torch.
- `out_dims=None` for an output: the elements' outputs must be one object or equal; otherwise
  the error torch gives for returning a batched tensor there (an output that depends on the
  batch only through equal values is returned, where torch would raise).
- `.item()`, `float()`, `int()` or `bool()` (an `if`) of a value computed from a batch element
  raises torch's error while a trace records `f` (compiled, the default: Note [Numbers from
  batched values] in _vmap_scalars.py).
Known differences: with `compile=False` outside a compiled function, `.item()` and
data-dependent control flow work per element (torch raises); a batch of size 0 runs `f` once
on zeros to learn the output shapes.
"""
from .. import _func_levels as _levels
from .._errors import TracegradIndexError, TracegradRuntimeError, TracegradValueError
from .._rng_guard import forbid_random
from .._tensor import Tensor
from ._forward import _check_randomness

_MISSING = object()


def _name(func):
    return getattr(func, "__name__", repr(func))


def _tree(obj):
    """(leaves, rebuild) over tuples, lists and dicts only (torch's pytree for vmap args)."""
    if isinstance(obj, (tuple, list)):
        parts = [_tree(x) for x in obj]
        typ = type(obj)

        def build(it):
            items = [b(it) for _, b in parts]
            return typ(*items) if hasattr(obj, "_fields") else typ(items)
        return [leaf for p, _ in parts for leaf in p], build
    if isinstance(obj, dict):
        parts = [(k, _tree(v)) for k, v in obj.items()]
        return ([leaf for _, (p, _) in parts for leaf in p],
                lambda it: type(obj)((k, b(it)) for k, (_, b) in parts))
    return [obj], lambda it: next(it)


def _describe(obj):
    if isinstance(obj, (tuple, list)):
        return f"{type(obj).__name__}({', '.join(_describe(x) for x in obj)})"
    if isinstance(obj, dict):
        return "dict(" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in obj.items()) + ")"
    return "*"


def _broadcast(dims, obj, mismatch):
    """One dim per leaf of `obj`: `dims` is a prefix of `obj`'s structure."""
    if not isinstance(dims, (tuple, list, dict)):       # a leaf (checked by the caller)
        return [dims] * len(_tree(obj)[0])
    if isinstance(dims, (tuple, list)) and isinstance(obj, (tuple, list)) \
            and len(dims) == len(obj):
        return [d for di, o in zip(dims, obj) for d in _broadcast(di, o, mismatch)]
    if isinstance(dims, dict) and isinstance(obj, dict) and set(dims) == set(obj):
        return [d for k in obj for d in _broadcast(dims[k], obj[k], mismatch)]
    raise mismatch()


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None, compile=True):
    """Vectorize `func` over a batch dimension: the batched result of `func` applied to each
    slice of the inputs along `in_dims`, stacked at `out_dims` (torch.func.vmap's API).

    `in_dims`: an int or None (for every argument) or a tuple with one entry per positional
    argument, each an int, None (not batched) or a nested structure matching that argument.
    Keyword arguments are not batched. `out_dims`: likewise for the outputs. `chunk_size`
    is accepted (results do not depend on it). Implemented by looping over the batch with a
    compiled `func` (Note [vmap by looping] in this file), exact but not vectorized; in-place
    updates of unbatched tensors and random draws under randomness='error' raise.

    >>> tg.func.vmap(tg.dot)(tg.ones(5, 3), tg.ones(5, 3))        # tensor([3., 3., 3., 3., 3.])
    >>> tg.func.vmap(tg.func.grad(loss), in_dims=(None, 0, 0))(params, xs, ys)  # per sample
    """
    _check_randomness(randomness)
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise TracegradValueError(
            f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")
    return _Vmapped(func, in_dims, out_dims, randomness, compile)


class _Vmapped:
    """The vmapped function; `.compiled` is the per-element CompiledFunction (or None)."""

    def __init__(self, func, in_dims, out_dims, randomness, compile):
        self.func, self.in_dims, self.out_dims = func, in_dims, out_dims
        self.randomness = randomness
        self.compiled = _element_runner(func, randomness) if compile else None
        self.__name__ = f"vmap_{_name(func)}"
        self.__doc__ = getattr(func, "__doc__", None)

    def __repr__(self):
        return f"<tracegrad.func.vmap of {_name(self.func)!r}>"

    def __call__(self, *args, **kwargs):
        name = _name(self.func)
        where = f"vmap({name}, in_dims={self.in_dims}, ...)(<inputs>)"
        if not args:
            raise TracegradValueError(
                f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you "
                "are trying to vmap over a function with no inputs. The latter is unsupported.")
        leaves, build, dims = self._in_dims(args, where)
        size = self._batch_size(leaves, dims, where)
        run = self.compiled if self.compiled is not None else self.func
        watched = _watch(self.func, leaves, dims)
        state = None
        if self.randomness == "same":
            from ..random import get_rng_state
            state = get_rng_state()
        outs = []
        for i in range(max(size, 1)):
            if state is not None and i:
                from ..random import set_rng_state
                set_rng_state(state)
            elem = [_slice(x, d, i, size) for x, d in zip(leaves, dims)]
            with forbid_random(self.randomness == "error"), _levels.level(_levels.VMAP), \
                    _levels.batched([e for e, d in zip(elem, dims) if d is not None]):
                outs.append(run(*build(iter(elem)), **kwargs))
            _check_unchanged(watched, size)
        return _stack_outputs(outs, size, self.out_dims, name)

    def _in_dims(self, args, where):
        dims = self.in_dims
        if not (dims is not None and isinstance(dims, (int, tuple)) and
                not isinstance(dims, bool)):
            raise TracegradValueError(
                f"{where}: expected `in_dims` to be int or a (potentially nested) tuple matching "
                f"the structure of inputs, got: {type(dims)}.")

        def mismatch():
            return TracegradValueError(
                f"{where}: in_dims is not compatible with the structure of `inputs`. in_dims "
                f"has structure {_describe(dims)} but inputs has structure {_describe(args)}.")
        leaves, build = _tree(args)
        per_leaf = _broadcast(dims, args, mismatch)
        for x, d in zip(leaves, per_leaf):
            if d is None:
                continue
            if not isinstance(d, int) or isinstance(d, bool):
                raise TracegradValueError(
                    f"{where}: Got in_dim={d} for an input but in_dim must be either an integer "
                    "dimension or None.")
            if not isinstance(x, Tensor):
                raise TracegradValueError(
                    f"{where}: Got in_dim={d} for an input but the input is of type {type(x)}. "
                    "We cannot vmap over non-Tensor arguments, please use None as the "
                    "respective in_dim")
            n = x.dim()
            if not -n <= d < n:
                raise TracegradValueError(
                    f"{where}: Got in_dim={d} for some input, but that input is a Tensor of "
                    f"dimensionality {n} so expected in_dim to satisfy -{n} <= in_dim < {n}.")
        return leaves, build, [None if d is None else d % x.dim()
                               for x, d in zip(leaves, per_leaf)]

    @staticmethod
    def _batch_size(leaves, dims, where):
        sizes = [x.shape[d] for x, d in zip(leaves, dims) if d is not None]
        if not sizes:
            raise TracegradValueError("vmap: Expected at least one Tensor to vmap over")
        if len(set(sizes)) > 1:
            raise TracegradValueError(
                "vmap: Expected all tensors to have the same size in the mapped dimension, got "
                f"sizes {sizes} for the mapped dimension")
        return sizes[0]


def _element_runner(func, randomness):
    """`func` compiled (cached per function and randomness: a function is always traced
    under the randomness guard it runs with); an already compiled or transformed `func` is
    used as it is."""
    from ..compiler import CompiledFunction
    from ._transforms import _compiled, _Transformed
    if isinstance(func, (CompiledFunction, _Transformed, _Vmapped)):
        return None
    return _compiled("vmap", func, func, (randomness,))


def _slice(x, d, i, size):
    if d is None:
        return x
    if size == 0:                        # no element: zeros of an element's shape
        from ..ops.creation import zeros
        shape = tuple(x.shape[:d]) + tuple(x.shape[d + 1:])
        return zeros(shape, dtype=x.dtype)
    return x[(slice(None),) * d + (i,)]     # a view (Tensor.select is not callable here)


# -- in-place updates of unbatched tensors --

def _watch(func, leaves, dims):
    """(tensor, version) for every unbatched tensor the call could update in place."""
    found = {}
    for x, d in zip(leaves, dims):
        if d is None and isinstance(x, Tensor):
            found[id(x)] = x
    _captured(func, found, set(), depth=0)
    return [(t, t._vc.v) for t in found.values()]


def _captured(obj, found, seen, depth):
    """Collect tensors reachable from a function: closures, named globals, defaults, bound
    `self`, partials, modules (parameters and buffers), and shallow containers."""
    from ..nn.module import Module
    if id(obj) in seen or depth > 6:
        return
    seen.add(id(obj))
    if isinstance(obj, Tensor):
        found[id(obj)] = obj
    elif isinstance(obj, Module):
        for t in list(obj.parameters()) + list(obj.buffers()):
            found[id(t)] = t
        _captured(type(obj).forward, found, seen, depth + 1)
    elif isinstance(obj, (tuple, list, set, frozenset)):
        for x in list(obj)[:256]:
            _captured(x, found, seen, depth + 1)
    elif isinstance(obj, dict):
        for x in list(obj.values())[:256]:
            _captured(x, found, seen, depth + 1)
    elif hasattr(obj, "__func__") and hasattr(obj, "__self__"):      # bound method
        _captured(obj.__self__, found, seen, depth + 1)
        _captured(obj.__func__, found, seen, depth + 1)
    elif hasattr(obj, "__code__"):                                    # a Python function
        for cell in obj.__closure__ or ():
            try:
                _captured(cell.cell_contents, found, seen, depth + 1)
            except ValueError:                                        # an empty cell
                pass
        _captured(obj.__defaults__ or (), found, seen, depth + 1)
        names = _code_names(obj.__code__)
        glb = getattr(obj, "__globals__", {})
        for n in names:
            v = glb.get(n, _MISSING)
            if isinstance(v, (Tensor, Module)) or callable(v) and hasattr(v, "__code__"):
                _captured(v, found, seen, depth + 1)
    else:
        for attr in ("func", "f", "fn"):                 # partials and tracegrad wrappers
            inner = getattr(obj, attr, None)
            if callable(inner):
                _captured(inner, found, seen, depth + 1)
        for attr in ("args", "keywords"):
            inner = getattr(obj, attr, None)
            if isinstance(inner, (tuple, dict)):
                _captured(inner, found, seen, depth + 1)


def _code_names(code):
    names = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):                       # nested functions and lambdas
            names |= _code_names(c)
    return names


def _check_unchanged(watched, size):
    for t, v in watched:
        if t._vc.v != v:
            raise TracegradRuntimeError(
                "vmap: the function updated in place a tensor that is not batched (an "
                f"in_dims=None argument or a tensor it captures, of shape {list(t.shape)}). "
                "tracegrad's vmap runs the function once per batch element, so the update "
                f"would run {size} times, where torch raises (a batched value written into an "
                "unbatched tensor) or runs it once. Return the new value from the function, or "
                "update the tensor outside vmap.")


# -- outputs --

def _out_dims_per_leaf(out_dims, out, name):
    where = f"vmap({name}, ..., out_dims={out_dims})"
    ok = (out_dims is None or isinstance(out_dims, (int, tuple, list, dict))) \
        and not isinstance(out_dims, bool)
    if not ok:
        raise TracegradValueError(
            f"{where}: `out_dims` must be an int, None or a python collection of ints "
            "representing where in the outputs the vmapped dimension should appear.")
    if isinstance(out_dims, tuple) and len(out_dims) == 1 and not isinstance(out, tuple):
        out_dims = out_dims[0]

    def mismatch():
        return TracegradValueError(
            f"{where}(<inputs>): out_dims is not compatible with the structure of `outputs`. "
            f"out_dims has structure {_describe(out_dims)} but outputs has structure "
            f"{_describe(out)}.")
    return _broadcast(out_dims, out, mismatch)


def _stack_outputs(outs, size, out_dims, name):
    from ..ops.creation import zeros
    from ..ops.shape import stack
    leaves0, build = _tree(outs[0])
    per_elem = [_tree(o)[0] for o in outs]
    if any(len(p) != len(leaves0) for p in per_elem):
        raise TracegradRuntimeError(
            f"vmap({name}, ...): `{name}` returned outputs of different structures for "
            "different batch elements")
    dims = _out_dims_per_leaf(out_dims, outs[0], name)
    result = []
    for k, (first, d) in enumerate(zip(leaves0, dims)):
        column = [p[k] for p in per_elem]
        if d is None:
            if not all(c is first or _equal(c, first) for c in column):
                raise TracegradValueError(
                    f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim "
                    "is None")
            result.append(first)
            continue
        if not isinstance(first, Tensor) or not all(isinstance(c, Tensor) for c in column):
            bad = next(type(c) for c in column if not isinstance(c, Tensor))
            raise TracegradValueError(
                f"vmap({name}, ...): `{name}` must only return Tensors, got type {bad}. Did "
                "you mean to set out_dims= to None for output?")
        n = first.dim() + 1
        if not -n <= d < n:
            raise TracegradIndexError(
                f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got "
                f"{d})")
        if size == 0:
            shape = list(first.shape)
            shape.insert(d % n, 0)
            result.append(zeros(tuple(shape), dtype=first.dtype))
        else:
            result.append(stack(column, dim=d))
    return build(iter(result))


def _equal(a, b):
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return (a.shape == b.shape and a.dtype == b.dtype
                and bool((a.detach() == b.detach()).all()))
    try:
        return bool(a == b)
    except Exception:                                   # noqa: BLE001 (any comparison error)
        return False
