"""The recorded autograd graph: `Node` (a tensor's grad_fn) and `AccumulateGrad` for leaves.

Note [Saved values]
A node keeps the operands its primitive's VJP declared in `saves`, each with the version
counter value seen when saved. Unpacking compares versions and raises PyTorch's message,
naming the op, if an in-place operation changed a saved value. The output, when saved, is
kept as raw data plus version (not as the Tensor) so output -> grad_fn -> output forms no
reference cycle; it is re-wrapped with this node as its grad_fn on unpack. After backward
without `retain_graph`, saved values are released and a second unpack raises.
"""
import itertools
import threading
import types
import weakref

from .._errors import InplaceError, TracegradRuntimeError, op_error
from .. import _dtype as D
from .. import _effects
from .._effects import _get_hook
from .. import _tensor
from .._tensor import Tensor     # _tensor imports this module lazily, so no cycle
from .post_accumulate import run_post_hooks
from .._saved_hooks import save_on_cpu, saved_tensors_hooks  # noqa: F401 (PyTorch's home)

_seq = itertools.count()

FREED_MSG = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward.")


class RemovableHandle:
    """Returned by register_hook; `remove()` unregisters the hook."""

    def __init__(self, container, item):
        self._container, self._item = container, item

    def remove(self):
        try:
            self._container.remove(self._item)
        except ValueError:
            pass


HOOKED = [False]        # a gradient hook was registered: Note [Leaf accumulation order]


def hooked():
    """Note that a gradient hook was registered (Note [Leaf accumulation order] in
    engine.py: from now on backward orders leaves as PyTorch does)."""
    HOOKED[0] = True


class Node:
    """A backward function in the recorded graph (what `tensor.grad_fn` returns)."""

    __slots__ = ("prim", "attrs", "edges", "saved", "versions", "out_saved", "shapes",
                 "dtypes", "needs", "seq", "pre_hooks", "hooks", "released", "n_outputs",
                 "metadata", "__weakref__")

    # PyTorch's highest sequence number (AccumulateGrad, Error): runs as soon as all its
    # inputs arrived (Note [Leaf accumulation order] in engine.py)
    ready_first = False
    # a compiled call's node, whose edges may all lead to leaves (Note [One node feeding
    # leaves] in engine.py)
    leaf_sink = False

    def __init__(self, prim, attrs, edges, shapes, dtypes, needs, n_outputs=1):
        self.prim = prim
        self.attrs = attrs
        self.edges = edges            # tuple of (Node, output_nr) or None, one per operand
        # shapes and numpy dtypes of the operands (the engine casts gradients to them)
        self.shapes = shapes
        self.dtypes = dtypes
        self.needs = needs
        self.saved = None
        self.versions = None
        self.out_saved = None
        self.seq = next(_seq)
        self.pre_hooks = None         # {output_nr: [fn(grad) -> grad|None]}
        self.hooks = None
        self.released = False
        self.n_outputs = n_outputs
        self.metadata = None

    # -- PyTorch-facing surface --
    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__} object at {id(self):#x}>"

    @property
    def next_functions(self):
        return tuple((e[0], e[1]) if e is not None else (None, 0) for e in self.edges)

    def register_hook(self, fn):
        """`fn(grad_inputs, grad_outputs)` runs after this node computed its gradients."""
        hooked()
        if self.hooks is None:
            self.hooks = []
        self.hooks.append(fn)
        return RemovableHandle(self.hooks, fn)

    def register_prehook(self, fn):
        """`fn(grad_outputs)` runs before this node; may return replacement gradients."""
        return self._add_pre_hook(-1, fn)

    def _add_pre_hook(self, nr, fn):
        hooked()
        if self.pre_hooks is None:
            self.pre_hooks = {}
        lst = self.pre_hooks.setdefault(nr, [])
        lst.append(fn)
        return RemovableHandle(lst, fn)

    # -- saved values --
    def unpack_inputs(self):
        saved = self.saved             # read once: another thread may release meanwhile
        if saved is None:
            if self.released:       # names the user's line that ran backward again
                raise op_error(TracegradRuntimeError, None, FREED_MSG)
            return ()
        for t, v in zip(saved, self.versions):
            vc = getattr(t, "_vc", None)
            if vc is not None and vc.v != v:
                raise _version_error(t, v, self)
        return saved

    def unpack_out(self):
        out_saved = self.out_saved
        if out_saved is None:
            if self.released:       # names the user's line that ran backward again
                raise op_error(TracegradRuntimeError, None, FREED_MSG)
            return None
        data, vc, v = out_saved
        if vc.v != v:
            fake = Tensor._wrap(data)
            fake._vc = vc
            raise _version_error(fake, v, self, output=True)
        t = Tensor._wrap(data, True, self)
        t._vc = vc
        return t

    def release(self):
        if self.saved is not None or self.out_saved is not None:
            self.released = True
            self.saved = None
            self.out_saved = None

    def apply(self, grads):
        """Gradients for each operand from the gradient(s) of this node's output(s)."""
        # unpack_inputs() and unpack_out() inlined: this runs once per node per backward
        saved, out_saved = self.saved, self.out_saved
        if saved is None:
            if self.released:
                raise op_error(TracegradRuntimeError, None, FREED_MSG)
            saved = ()
        else:
            for t, v in zip(saved, self.versions):
                # only tensors carry versions (saved Python numbers do not)
                if isinstance(t, Tensor) and t._vc.v != v:
                    raise _version_error(t, v, self)
        if out_saved is None:
            return self.prim.vjp(grads[0], saved, None, self)
        data, vc, v = out_saved
        if vc.v != v:
            self.unpack_out()                   # raises the version error
        out = Tensor._wrap(data, True, self)
        out._vc = vc
        return self.prim.vjp(grads[0], saved, out, self)


# Note [Monomorphic nodes]
# Every primitive has its own Node subclass, so that `type(y.grad_fn).__name__` is PyTorch's
# name (`MulBackward0`). CPython 3.11 caches attribute access per bytecode site and per type:
# one shared `Node.__init__` storing into instances of ~100 classes misses that cache on
# almost every store and takes the slow generic path. `node_class` gives each subclass
# private copies of the methods that run once per op (same code object contents, own
# caches). Behaviour is identical; bench/eager_overhead.py runs ~5% fewer instructions/op.
_PER_CLASS_METHODS = ("__init__", "apply", "unpack_inputs", "unpack_out", "release")


def node_class(name):
    """A new Node subclass called `name` (a grad_fn type, e.g. `MulBackward0`)."""
    namespace = {"__slots__": ()}
    for m in _PER_CLASS_METHODS:
        f = Node.__dict__[m]
        copy = types.FunctionType(f.__code__.replace(), f.__globals__, m, f.__defaults__,
                                  f.__closure__)
        copy.__kwdefaults__, copy.__doc__ = f.__kwdefaults__, f.__doc__
        copy.__qualname__ = f"{name}.{m}"
        namespace[m] = copy
    return type(name, (Node,), namespace)


def _version_error(t, expected, node, output=False, output_nr=0):
    shape = list(t._data.shape)
    kind = D.tensor_type_name(t._data.dtype)
    which = f"output {output_nr} of {saved_by(node.name())}" if output else _describe(t)
    return InplaceError(
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [torch.{kind} {shape}], which is {which}, is at version {t._vc.v}; "
        f"expected version {expected} instead. Hint: the value was saved for {node.name()}; "
        "clone() it before modifying it in place, or do the in-place op out of place "
        "(e.g. `x = x + 1` instead of `x += 1`).")


def _describe(t):
    fn = t._grad_fn
    if fn is None:
        return "a leaf tensor" if t.requires_grad else "a tensor that does not require grad"
    return f"output {t._output_nr} of {saved_by(fn.name())}"


def saved_by(node_name):
    """How PyTorch's version error names a node: ExpBackward0 -> Exp, SumBackward1 -> Sum1,
    MyFnBackward -> MyFn (the grad_fn name without "Backward" and a 0 overload index)."""
    head, sep, tail = node_name.rpartition("Backward")
    if not sep or not (tail == "" or tail.isdigit()):
        return node_name
    return head + ("" if tail == "0" else tail)


class AccumulateGrad(Node):
    """The sink for a leaf tensor that requires grad: sums incoming gradients into `.grad`."""

    __slots__ = ("_var", "lock")
    ready_first = True

    def __init__(self, variable):
        Node.__init__(self, None, None, (), (variable.shape,), (variable._data.dtype,), (True,))
        self._var = weakref.ref(variable)
        self.lock = threading.Lock()
        self.seq = -1

    @property
    def variable(self):
        """The leaf tensor (None once the user dropped it: nobody can read its .grad then)."""
        return self._var()

    def accumulate(self, g, create_graph):
        var = self._var()
        if var is None:
            return
        if _get_hook() is not None and _effects.active() is not None:
            _effects.accumulate_traced(var, g, create_graph)
        else:
            self._accumulate(var, g, create_graph)
        hooks = var.__dict__.get("_leaf_hooks")
        if hooks:                   # Note [Post-accumulate-grad hooks] in post_accumulate.py
            run_post_hooks(var, hooks)

    def _accumulate(self, var, g, create_graph):
        with self.lock:
            old = var._grad
            if old is None:
                if create_graph:
                    # a copy that stays differentiable (PyTorch: CopyBackwards): `.grad`
                    # must not alias the user's gradient, another leaf's `.grad` or a
                    # read-only expand view of the incoming gradient
                    var.grad = g.clone()
                elif g.__dict__.get("_owned") and not g.__dict__.get("_adopted") \
                        and g._data.dtype == var._data.dtype and not self.pre_hooks:
                    # a gradient a compiled backward made for this leaf alone: adopted
                    g._adopted = True
                    var.grad = Tensor._wrap(g._data)
                else:
                    # copy: `g` may be shared (the user's gradient, or passed to two edges)
                    var.grad = Tensor._wrap(g._data.copy())
            elif create_graph or old.requires_grad:
                var.grad = old + g
            else:
                old._data += g._data


_tensor._layers.AccumulateGrad = AccumulateGrad   # Note [Layers] in _tensor.py
