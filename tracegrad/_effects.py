"""What a traced function does besides computing values: the hooks that report it.

Note [Effects]
A compiled path replays the primitives a trace recorded. Whatever else the traced function
did — autograd effects (`register_hook`, `detach_`, `requires_grad_`, `retain_grad`, custom
`autograd.Function`s, `.grad` writes by `backward()`), reads of tensor attributes that can
change between calls (`.grad`), and Python side effects (`print`, mutating a list the caller
holds, Python's `random`) — would be lost or frozen on cache hits. The places in tracegrad
that do such things call `note(...)` / `grad_read(...)` here; outside a trace these are one
context-variable read and return. The active tracer records each effect with the user's
source line, and the compiler decides per kind (compiler/path.py `_needs_eager`,
`CompiledPath` replays): replay it on every call, read it through a source per call, or
run the function eagerly for such calls with a warning naming the line. Never silently.

`watch_python()` is the Python-side monitor: a `sys.setprofile` hook installed for the
duration of one trace only (thread-local), reporting calls made *from user code* to
`print`, to Python's and numpy's random generators and clocks, and to mutating methods of
containers that existed before the trace (the caller's or global lists, dicts and sets).
"""
import contextvars
import datetime as _datetime
import gc
import os
import sys
import sysconfig

trace_hook = contextvars.ContextVar("tracegrad_trace_hook", default=None)
_get_hook = trace_hook.get

# the package's folder as code objects name it: as imported (`examples/../tracegrad` when
# sys.path holds an unnormalized entry) and normalized
_PKG = tuple({os.path.dirname(os.path.abspath(__file__)) + os.sep,
              os.path.dirname(__file__) + os.sep})
# installed libraries and the standard library are not the user's code (a gc callback of
# a test framework calling a clock mid-trace is not the traced function's side effect)
_LIBS = tuple(sorted({os.path.join(p, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")
                      if (p := sysconfig.get_paths().get(k))}))


# standard-library code that runs between the user's lines without being handed the
# user's objects (weak-reference callbacks of the garbage collector, locks, `with`)
_HARMLESS = tuple(os.path.join(p, m) for p in {sysconfig.get_paths().get("stdlib")} if p
                  for m in ("weakref.py", "_weakrefset.py", "threading.py", "contextlib.py",
                            "abc.py", "enum.py"))
_OURS = _PKG + ("<tracegrad",)
_LIBRARY_MODULES = ("tracegrad", "numpy", "torch", "jax", "builtins", "functools", "typing",
                    "abc")


def is_library_module(name):
    """Whether module `name` is library code, not the user's (the counterpart of the
    file-path test `_is_user_frame` for objects: classes and functions by `__module__`)."""
    return (name or "builtins").startswith(_LIBRARY_MODULES)


def active():
    """The tracer recording the user's forward code, or None (fast path: no trace)."""
    hook = _get_hook()
    if hook is None:
        return None
    tracer = getattr(hook, "__self__", None)
    if tracer is None or getattr(tracer, "phase", "fwd") != "fwd" or tracer.site is not None:
        return None
    return tracer


def note(kind, message, tensor=None, eager=True):
    """Report an effect of kind `kind` (see Note [Effects]) to the active tracer, if any."""
    tracer = active()
    if tracer is not None:
        tracer.note_effect(kind, message, tensor, eager)


def attr_read(t, attr, value):
    """Python read `t.<attr>` inside a trace; if `t` comes from outside the trace, what it
    read becomes a guard (Note [Effects]): `requires_grad`, `shape`, `dtype`, the type of
    `grad_fn` (also `is_leaf`), `_version`, and the layout (Note [Layout read by Python])."""
    tracer = active()
    if tracer is not None:
        tracer.note_attr_read(t, attr, value)


def layout_read(root):
    """An in-place op's overlap check (Note [Overlapping in-place operands] in _overlap.py)
    read the layout of the memory owned by numpy array `root`: inside a trace, the strides
    of the arguments and captured tensors on that memory become guards, as if Python had
    read `x.stride()` (Note [Layout read by Python])."""
    tracer = getattr(_get_hook(), "__self__", None)
    if tracer is not None and hasattr(tracer, "note_layout_read"):
        tracer.note_layout_read(root)


def attr_now(t, attr):
    """What `attr_read` recorded, read again now (for the per-call check)."""
    if attr == "grad_fn":
        return type(t._grad_fn)
    if attr == "requires_grad":
        return t._rg
    if attr == "_version":
        return t._vc.v
    if attr in _LAYOUT:                      # Note [Layout read by Python]
        from . import _tensor_storage
        return _LAYOUT[attr](_tensor_storage, t)
    return t._data.shape if attr == "shape" else t._data.dtype


# Note [Layout read by Python]
# `x.stride()`, `x.storage_offset()` and `x.data_ptr()` of an argument or a captured tensor
# are facts of the memory the caller hands in, which the entry key does not fix (it keys
# shape, dtype and C-contiguity: `w.t()` and `w[:, ::2]` are both just non-contiguous).
# Python reading one decides something (a branch, a returned number), so each is a guard,
# checked before every cached call, like the tensor attributes above.
_LAYOUT = {"stride": lambda m, t: m.stride(t), "storage_offset": lambda m, t:
           m.storage_offset(t), "data_ptr": lambda m, t: m.data_ptr(t)}


def grad_set(owner, old=None):
    """`owner.grad = value` inside a trace (it was `old`): replayed (Note [Effects])."""
    tracer = active()
    if tracer is not None:
        tracer.note_grad_set(owner, old)


def grad_read(owner, g, clearing=False):
    """`owner.grad` was read inside a trace and gave `g` (a Tensor or None); `clearing`:
    by zero_grad, only to set it to None."""
    tracer = active()
    if tracer is not None:
        tracer.note_grad_read(owner, g, clearing)


def accumulate_traced(var, g, create_graph):
    """`backward()` inside a trace reaching the leaf `var` (Note [Effects]): the write into
    `var.grad` is recorded, so every compiled call performs it. A first gradient becomes a
    new `.grad` (a hidden output of the program, assigned after each call); a gradient
    added to an existing `.grad` is an in-place add into that tensor, read per call."""
    tracer = active()
    if create_graph or g.requires_grad:
        tracer.note_effect("backward", "backward(create_graph=True) into a leaf's .grad", var)
        var._grad = g.clone() if var._grad is None else var._grad + g
        return
    from . import _mode
    old = var._grad
    tracer.note_grad_read(var, old)
    with _mode.no_grad():
        if old is None:
            var._grad = g.detach().clone()
        elif old.requires_grad:
            tracer.note_effect("backward", "backward() into a .grad that requires grad", var)
            var._grad = old + g
            return
        else:
            old.add_(g)
    tracer.note_grad_set(var)


def hyper(holder, key, index=None, narrow=False):
    """`holder[key]` (or `holder[key][index]`, an item of a tuple such as Adam's betas), a
    hyper-parameter such as a learning rate. Eagerly the Python number; inside a trace a 0-d
    float64 tensor the compiled program reads from the same place on every call, so a
    scheduler changing it never re-traces (Note [Effects]). `narrow`: the caller's math
    gives eager's bits for numpy float32 values too (Note [Narrow numpy hyper-parameters])."""
    value = holder[key] if index is None else holder[key][index]
    tracer = active()
    if _one_element_tensor(value):           # Note [Tensor hyper-parameters]
        return value.item() if tracer is None else _tensor_hyper(value)
    if tracer is None:
        return value
    found = None if narrow else _narrow_in(holder)   # Note [Narrow numpy hyper-parameters]
    if found is not None:
        tracer.note_effect("hyper", f"the hyper-parameter {found[0]!r} = {found[1]!r}, "
                           f"a numpy {type(found[1]).__name__} (eager computes with it in "
                           "its precision; pass a Python float: float(value))")
        return value
    if not is_number(value, narrow):
        return value
    return tracer.hyper_source(holder, key, value, index, narrow)


# Note [Tensor hyper-parameters]
# PyTorch accepts a 1-element tensor as a learning rate or beta (`Adam(ps, lr=tensor(0.01))`,
# changed in place by `lr.fill_(...)`). Its value is what the update computes with, so it is
# read as a number: eagerly its `item()` (float64 arithmetic, as a Python float's), in a
# trace the tensor (an implicit input, read per call) cast to a 0-d float64 tensor, which
# is what every other hyper-parameter read per call is. Using the tensor itself in the
# update mixed its dtype's promotion with the float64 runtime values of its neighbours
# (`lr * weight_decay` a float32 product eagerly, a float64 one compiled): a silent
# difference in the last bits of every step.

def _one_element_tensor(value):
    from ._tensor import Tensor
    return (isinstance(value, Tensor) and value.numel() == 1
            and (value.is_floating_point() or value.dtype.is_signed))


def _tensor_hyper(value):
    from . import _dtype as D
    with _no_grad():
        return value.detach().reshape(()).to(D.float64)


def _no_grad():
    from ._mode import no_grad
    return no_grad()


def as_scalar_for(value, like):
    """Note [Hyper-parameters meet zero-dim tensors]
    A hyper-parameter `hyper` read per call is a 0-d float64 tensor, where eager code has a
    Python number. The two promote alike against a tensor with dimensions (the tensor's
    dtype wins), but not against a 0-d one: PyTorch's rules lift a 0-d float32 tensor
    times a 0-d float64 tensor to float64, while times a Python float stays float32. A 0-d
    parameter (a log-variance, a temperature) would then be updated in another precision
    than eager's. Eager casts the Python number to the tensor's dtype before the kernel
    runs (`_dispatch._scalar`); this does the same to the runtime value, so the update is
    eager's for tensors of any rank. `value` (a number or such a tensor) as an operand
    meeting the tensor `like`."""
    from ._tensor import Tensor
    if isinstance(value, Tensor) and value.dtype is not like.dtype and like.is_floating_point():
        return value.to(like.dtype)
    return value


# Note [Headroom of ints read per call]
# An int read per call (an argument, a counter on an object) is at most 2**61 in magnitude,
# half of the 2**62 the traced int64 results keep below (integers.LIMIT): `step + 1`,
# `2 * n` or `a + b` of two such ints then need no overflow guard. A guard inside the program
# would come after its parameter updates and keep them from being made in place (a step
# counted with `self.global_step += 1` ran 25% slower). A larger int is keyed by value.
INT_READ_LIMIT = 2 ** 61
_INT_LIMIT = INT_READ_LIMIT


def is_number(value, narrow=False):
    """A real number a hyper-parameter may be read per call as: a Python int or float, or
    a numpy one (a learning rate computed with numpy), never a bool; a numpy float
    narrower than float64 only when `narrow` (Note [Narrow numpy hyper-parameters]).
    `narrow` "int": an int argument read per call as int64, a plain int of at most 2**62
    (Note [Integers read per call] in tracing/integers.py). `narrow` "float": a Python float
    only (a float place of Python state, Note [Float attributes that change])."""
    t = type(value)
    if narrow == "int":
        return t is int and -_INT_LIMIT <= value <= _INT_LIMIT
    if narrow == "float":                # a float place of Python state: a float only
        return t is float
    return t is float or t is int or t in _NUMPY_NUMBERS or (narrow and t in _NARROW_FLOATS)


# Note [Narrow numpy hyper-parameters]
# A hyper-parameter read per call is a float64 0-d tensor in the trace, which computes as a
# Python float or a numpy float64 does. A `np.float32` learning rate (a schedule computed
# in float32 numpy) does not: eager Adam's `lr / (1 - beta1 ** step)` is a float32
# division (numpy keeps the float32 against a Python float), while in a trace it met
# `beta1`, a float64 0-d tensor, which won: the compiled step size differed from eager's
# in the last bit, and so did every parameter after it. So while a param group holds such
# a value (float32, float16, also inside a tuple such as betas), every hyper-parameter of
# that group is read as eager reads it, the plain number, and the trace notes an effect:
# the traced call computes eager's update, and calls like these run eagerly after it, with
# a warning naming the key. A path traced with Python floats misses when such a value is
# set later (`is_number` is False for it), so that call re-traces under the same rule.
# An optimizer whose update uses each hyper-parameter in at most one operation before it
# meets a tensor (SGD, RMSprop: `-lr`, `1 - dampening`) reads them with `narrow=True`:
# one operation in float64 rounded to float32 is the float32 operation's result (float64
# has more than twice float32's precision), so float32 values stay runtime values there.
def _narrow_in(holder):
    """(key, value) of the first narrow numpy float among the values of `holder` (a param
    group) and the items of its tuples, or None."""
    for k, v in holder.items() if isinstance(holder, dict) else ():
        for x in (v if type(v) is tuple else (v,)):
            if type(x) in _NARROW_FLOATS:
                return k, x
    return None


def _numpy_numbers(narrow=False):
    import numpy as np
    return frozenset(t for t in set(np.sctypeDict.values())
                     if issubclass(t, (np.floating, np.integer))
                     and not issubclass(t, np.timedelta64)
                     and narrow == (issubclass(t, np.floating) and np.finfo(t).bits < 64))


_NUMPY_NUMBERS = _numpy_numbers()
_NARROW_FLOATS = _numpy_numbers(narrow=True)


def replayed(method):
    """Decorator for Python-only methods a compiled call must run again on every call
    (a learning-rate scheduler's `step`): inside a trace the call is recorded and runs;
    after each compiled call it runs again, in order (Note [Effects]). The state it
    rewrites is its own: not guarded. It must not compute with tensors; arguments other
    than plain Python values make such calls run eagerly, as does a reason the object's
    `_replay_refusal()` gives (a scheduler over tensor learning rates)."""
    import functools

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        tracer = active()
        if tracer is None:
            return method(self, *args, **kwargs)
        if tracer.numbers is not None:   # it runs and replays outside the trace: plain floats
            from .tracing.numbers import plain as plain_numbers
            args, kwargs = plain_numbers(args), plain_numbers(kwargs)
        plain = all(isinstance(a, (bool, int, float, str, type(None)))
                    for a in args + tuple(kwargs.values()))
        if not plain:
            tracer.note_effect("python", f"{type(self).__name__}.{method.__name__}() with "
                               "non-Python arguments", None)
        refusal = getattr(self, "_replay_refusal", None)
        reason = refusal() if refusal is not None else None
        if reason:                       # it would compute with tensors (a tensor lr)
            tracer.note_effect("python", f"{type(self).__name__}.{method.__name__}() "
                               f"{reason}", None)
        before = dict(getattr(self, "__dict__", {}))
        token = trace_hook.set(None)
        tracer.replaying += 1            # (reads made inside are replayed too)
        try:
            return method(self, *args, **kwargs)
        finally:
            tracer.replaying -= 1
            trace_hook.reset(token)
            if plain:                    # what it rewrote: Note [Reads of replayed state]
                after = getattr(self, "__dict__", {})
                tracer.note_replay(self, method, args, kwargs, {
                    k for k, v in after.items() if k not in before or before[k] is not v})
    return wrapper


_WRAPPER_CODE = replayed(lambda self: None).__code__


# Note [Settings read and set]
# Process-wide settings a program may read or set inside a compiled function -- print
# options, `use_deterministic_algorithms`, `set_num_threads`,
# `set_float32_matmul_precision` -- are Python state outside the IR (the default dtype and
# grad mode are in the entry key instead). Read inside a trace (`if
# are_deterministic_algorithms_enabled():`, `repr(t)` under the print options), a setting
# became a constant of the path: calls after the user changed it replayed the old value.
# Set inside a trace, it was set on the tracing call alone. So a read is a guard on the
# setting's place, at the value the call started with (a setting the trace set before
# reading it is the trace's own: no guard), and a set is a replayed call of the path, run
# again after each cached call with the same (plain Python) arguments.
def setting_read(holder, key, where):
    """`holder[key]`, a process-wide setting, read inside a trace: guarded."""
    tracer = active()
    if tracer is not None and (id(holder), key) not in tracer.settings_set:
        tracer.setting_reads.setdefault((id(holder), key), (holder, key, holder[key], where))


def _set_again(_, setter, *args, **kwargs):
    """A replayed setting call (`_`: the unused object slot of a replayed call)."""
    setter(*args, **kwargs)


def setting_set(setter, args, kwargs, holder, keys):
    """`setter(*args, **kwargs)`, which writes `holder[k]` for `k` in `keys`, called inside
    a trace: replayed after each cached call (Note [Settings read and set])."""
    tracer = active()
    if tracer is None:
        return
    if tracer.numbers is not None:
        from .tracing.numbers import plain as plain_numbers
        args, kwargs = plain_numbers(args), plain_numbers(kwargs)
    if not all(isinstance(a, (bool, int, float, str, type(None)))
               for a in args + tuple(kwargs.values())):
        tracer.note_effect("python", f"{setter.__name__}() with non-Python arguments", None)
    tracer.settings_set.update((id(holder), k) for k in keys)
    tracer.note_replay(None, _set_again, (setter,) + tuple(args), dict(kwargs))


def replay_reads(tracer, watch):
    """Note [Reads of replayed state]
    A replayed call (a scheduler's `step`) rewrites its object's attributes on every call,
    so they are not guarded. User code that reads them during the trace (`get_last_lr()`,
    `sched.last_epoch`, before or after the step) would bake one call's value into the
    path: returned, or computed with, it would go stale on the next call. Such a read makes
    the call run eagerly (an eager effect, with a warning naming it). A read is a method of
    the object other than the replayed ones called from user code (the profile hook sees
    it), or an attribute the replayed call rewrote named (or spelled as a string) in the
    user code the trace ran outside replayed calls."""
    objects = {}
    for obj, _, _, _, changed in tracer.replays:
        objects.setdefault(id(obj), (obj, set()))[1].update(changed)
    if not objects:
        return
    for key, cls, code, caller, line in watch.method_calls:
        if key in objects and code is not _WRAPPER_CODE:
            tracer.note_effect("python", f"{cls}.{code.co_name}(), which reads state the "
                               "replayed step() rewrites on every call (call it outside the "
                               "compiled function)", None,
                               site=f"{caller.co_filename}:{line} in {caller.co_name}")
            return
    names = watch.names()
    for obj, changed in objects.values():
        read = sorted(changed & names)
        if read:
            tracer.note_effect("python", f"reading {type(obj).__name__}.{read[0]}, which "
                               "the replayed step() rewrites on every call (read it outside "
                               "the compiled function)", None)
            return


def numpy_read(t):
    """`t.numpy()` inside a trace: the caller gets `t`'s memory; writes through it are
    checked when the trace ends (`Tracer.numpy_writes`)."""
    tracer = active()
    if tracer is not None:
        tracer.numpy_reads.append((t, tracer.env.get(id(t)), t._data.copy()))


_MUTATORS = frozenset(("append", "extend", "insert", "pop", "remove", "clear", "update",
                       "setdefault", "popitem", "add", "discard", "sort", "reverse",
                       "appendleft", "extendleft", "popleft", "__setitem__", "__delitem__"))
_DICT_READS = frozenset(("items", "values", "keys", "get", "copy", "pop", "popitem",
                         "setdefault", "__getitem__", "__iter__", "__contains__"))
# Note [Files]
# A compiled path replays tensor work; a file the traced function opens or writes (a
# checkpoint `tg.save(model.state_dict(), path)` or a log line written every step) would be
# written once, while tracing, and a later reader finds the first call's contents. So
# `open()` and writes to file objects from user code, and `tracegrad.save`, are effects that
# make such calls run eagerly, with a warning. So do `logging` calls from user code that
# emit a record (`log.info(...)`, `logging.warning(...)`): the handlers are arbitrary code
# (files, lists, the caller's line in the format), and the level can change between calls.
# A file written by another library's code (`np.save`, `json.dump`) is not seen: save
# outside the compiled function.
_OPEN = open
_PRINT = print           # the builtin (compiler/print_replay.py wraps builtins.print)
# Python's generators, the user's subclasses of random.Random included (`class Rng(random.
# Random)`: its `random()` is the C method of _random.Random, which only this check sees)
_PY_RANDOM = __import__("_random").Random
_WRITES = frozenset(("write", "writelines"))
_LOGGING = os.path.join("logging", "__init__.py")
_LOG_CALLS = frozenset(("debug", "info", "warning", "warn", "error", "exception", "critical",
                        "fatal", "log"))
_CLOCKS = frozenset(("time", "perf_counter", "monotonic", "process_time", "time_ns",
                     "perf_counter_ns", "monotonic_ns", "process_time_ns", "thread_time",
                     "thread_time_ns", "localtime", "gmtime", "ctime", "asctime", "strftime"))
# Note [Entropy and wall clocks]
# Values that differ on every eager call without a generator state to compare: the wall
# clock read through `datetime` (`datetime.now()`, `date.today()`), and the operating
# system's entropy, `os.urandom`, under `secrets`, `uuid.uuid4()` and `random.SystemRandom`
# (library code: the call is reported wherever it is made, at the user's line that led
# to it). A trace bakes in one call's value; such calls run eagerly.
_DATETIME_NOW = frozenset(("now", "utcnow", "today"))
_URANDOM = os.urandom


def _global_rng_states():
    """Python's and numpy's global generator states, cheap to compare (the key's bytes,
    not its 624-number text: that cost 2.5 ms per trace)."""
    import random
    import numpy as np
    st = np.random.get_state(legacy=False)
    inner = st["state"]
    key = inner.get("key") if isinstance(inner, dict) else None
    if isinstance(key, np.ndarray):
        np_state = (st["bit_generator"], key.tobytes(), inner.get("pos"), st.get("has_gauss"),
                    st.get("gauss"))
    else:                                # another bit generator: its state's text
        np_state = str(inner)
    return random.getstate(), np_state


def _is_user_frame(frame):
    fn = frame.f_code.co_filename
    return not (fn.startswith(_PKG) or fn.startswith(_LIBS) or fn.startswith(("<tracegrad", "<frozen")))


# Note [No collection while watching]
# The cyclic garbage collector runs the finalizers (`__del__`, weakref callbacks) of what it
# frees at whatever allocation triggers it. Inside a trace, a finalizer of another
# library's object run at an allocation in user code looked like a call user code made (a
# foreign call: every optimizer hyper-parameter then counted as read, and was guarded by
# value), and a user object's `__del__` like an effect of the traced function; whether it
# happened depended on what earlier code left for the collector (a test suite's order).
# Neither belongs to the call, so the collector is paused while user code is watched
# (objects freed by reference counting still finalize where the code drops them, and an
# explicit `gc.collect()` still collects).

class watch_python:
    """Context manager: report Python side effects of user code while tracing (Note [Effects]).

    `external` is the set of ids of containers that existed before the trace and that the
    caller can see (arguments, globals, closures, attributes): mutating one is an effect."""

    def __init__(self, tracer, external, roots=()):
        self.tracer, self.external = tracer, external
        self.roots = frozenset(roots)  # the code of the function traced
        self.user_codes = set()     # code objects of the user functions the trace ran
        self.first_globals = []     # [(code, its globals, the globals it names, its free
        #                             variables, on its first call)] (Note [Globals of code
        #                             the scan missed])
        self._kinds = {}            # code object -> "user" / "library" / "random"
        self.method_calls = []      # [(id(self), its type's name, code, caller code, line)]:
        #                             library methods user code called
        from ._tensor import Tensor
        from ._dispatch import trace_hook
        self._tensor, self._hook = Tensor, trace_hook
        self.outside_codes = set()  # user code run outside replayed calls
        self.foreign_calls = set()  # code of other libraries user code called
        self.dict_reads = set()     # ids of dicts user code read by computed keys (items(),
        #                             values(), ...: Note [Hyper-parameters unread])
        self.appends = {}           # id(list) -> [the list, its length before, the effects]:
        #                             `append` on a caller's list (compiler/append_replay.py)
        self.mutated = set()        # ids of the caller's containers changed otherwise

    def __enter__(self):
        self.prev = sys.getprofile()
        self.rng = _global_rng_states()
        self.collecting = gc.isenabled()        # Note [No collection while watching]
        gc.disable()
        sys.setprofile(self._event)
        return self

    def __exit__(self, *exc):
        prev = self.prev
        if prev is None or callable(prev):
            sys.setprofile(prev)
        else:                                # a C profiler (cProfile's): not a Python
            sys.setprofile(None)             # callable setprofile takes back; it
            getattr(prev, "enable", lambda: None)()   # re-installs itself
        if self.collecting:
            gc.enable()
        # numpy's generators are compiled methods no profiler sees: compare their states
        for name, before, after in zip(("Python's random", "numpy.random"), self.rng,
                                       _global_rng_states()):
            if before != after:
                self.tracer.note_effect("random", f"{name} (its global generator was used)",
                                        None)
        return False

    def _event(self, frame, event, arg):
        if event == "c_call":
            self._c_call(frame, arg)
            if arg is _PRINT:                # str(t) inside print(t) guards nothing: the
                self.tracer.printing += 1    # printing itself is the (reported) effect
        elif event in ("c_return", "c_exception"):
            if arg is _PRINT:
                self.tracer.printing -= 1
        elif event == "call":
            code = frame.f_code
            kind = self._kinds.get(code)         # decided once per code object
            if kind is None:
                kind = self._kinds[code] = (
                    "random" if code.co_filename.endswith(os.sep + "random.py")
                    and not code.co_filename.startswith(_PKG) else      # tracegrad.random
                    "user" if _is_user_frame(frame) or self._user_like(frame, code)
                    else "library")
                if kind == "user":
                    self.user_codes.add(code)
            if kind == "user" and not self.tracer.replaying:
                if code not in self.outside_codes and self._hook.get() is not None:
                    # Note [Globals of code the scan missed] (recording off: a custom
                    # Function's forward, which every compiled call runs again)
                    g = frame.f_globals
                    free = code.co_freevars and {nm: frame.f_locals[nm]
                                                 for nm in code.co_freevars
                                                 if nm in frame.f_locals}
                    names = code.co_names
                    if "globals" in names:       # Note [Data read by computed names]
                        from .compiler.state import public_data
                        names = set(names) | public_data(g)
                    self.first_globals.append((code, g, {nm: g[nm] for nm in names
                                                         if nm in g}, free or {}))
                self.outside_codes.add(code)
            if kind == "random":
                back = frame.f_back
                if back is not None and _is_user_frame(back):
                    self._report(back, "random", f"Python's random.{code.co_name}()")
            elif kind == "library":
                self._other_library(frame, code)
                back = frame.f_back
                if (code.co_name in _LOG_CALLS and code.co_filename.endswith(_LOGGING)
                        and back is not None
                        and _is_user_frame(back) and not self.tracer.replaying):
                    self._report(back, "print", f"logging {code.co_name}()")
            if (kind == "library" and not self.tracer.replaying
                    and (back := frame.f_back) is not None
                    and self._kinds.get(back.f_code) == "user"):
                if code.co_argcount and code.co_varnames[0] == "self":
                    obj = frame.f_locals.get("self")      # a method user code called (by
                    if not isinstance(obj, self._tensor):  # id: Note [Traced values])
                        self.method_calls.append((id(obj), type(obj).__name__, code,
                                                  back.f_code, back.f_lineno))

    def _user_like(self, frame, code):
        """Code of an installed package that plays the user's part: the traced function
        itself, or a method of a module class defined outside tracegrad (a model from a
        package). Its names and effects count as the user's."""
        if code in self.roots:
            return True
        if code.co_filename.startswith(_OURS) or not code.co_argcount \
                or code.co_varnames[0] != "self":
            return False
        obj = frame.f_locals.get("self")
        return "_modules" in getattr(obj, "__dict__", ()) and callable(
            getattr(obj, "named_parameters", None))

    def _other_library(self, frame, code):
        """Note [Unread attributes] (compiler/state_unread.py): whether user code called the
        Python code of another library (it may have been handed the user's objects, and
        read their attributes by computed names)."""
        if code.co_filename.startswith(_OURS):
            return
        back = frame.f_back
        if (back is not None and self._kinds.get(back.f_code) == "user"
                and not self.tracer.replaying and not code.co_filename.startswith(_HARMLESS)):
            self.foreign_calls.add(code)

    def ran(self):
        """The code objects of every Python function the trace called (user code, this
        library's, others'), replayed calls included."""
        return self._kinds.keys()

    def names(self):
        """The attribute and global names of the user code the trace ran outside replayed
        calls, and its string constants that could be names (`getattr(s, "last_epoch")`)."""
        out, stack = set(), list(self.outside_codes)
        while stack:
            c = stack.pop()
            out.update(c.co_names)
            out.update(k for k in c.co_consts if type(k) is str and k.isidentifier())
            stack += [k for k in c.co_consts if isinstance(k, type(c))]
        return out

    def constant_strings(self):
        """The string constants of the user code the trace ran (keys it may subscript)."""
        out, stack = set(), list(self.user_codes)
        while stack:
            for c in stack.pop().co_consts:
                if type(c) is str:
                    out.add(c)
                elif isinstance(c, type(_is_user_frame.__code__)):
                    stack.append(c)
        return out

    def _c_call(self, frame, fn):
        name = getattr(fn, "__name__", "")
        owner = getattr(fn, "__self__", None)
        if fn is _URANDOM and not self.tracer.replaying:   # Note [Entropy and wall clocks]
            user = frame
            while user is not None and not _is_user_frame(user):
                user = user.f_back
            self._report(user or frame, "random", "os.urandom() (the system's entropy)")
            return
        if not _is_user_frame(frame):
            return
        if type(owner) is dict and name in _DICT_READS:
            self.dict_reads.add(id(owner))
        if fn is _PRINT:                 # not through the wrapper: Note [Prints replayed]
            self._report(frame, "print", "print() through a name bound before the trace")
        elif name in _MUTATORS and id(owner) in self.external:
            self._report(frame, "mutation", f"{type(owner).__name__}.{name}() on a "
                         "container the caller can see")
            # Note [Appends to the caller's lists] in compiler/append_replay.py (code the
            # trace records: not a custom Function's forward, which every call runs again)
            if (name == "append" and type(owner) is list and not self.tracer.replaying
                    and self._hook.get() is not None):
                self.appends.setdefault(id(owner), [owner, len(owner), []])[2].append(
                    self.tracer.effects[-1])
            else:
                self.mutated.add(id(owner))
        elif fn is _OPEN or (name in _WRITES and type(owner).__module__ in ("_io", "io")):
            self._report(frame, "io", "open()" if fn is _OPEN else   # Note [Files]
                         f"{type(owner).__name__}.{name}() (a file)")
        elif name in _CLOCKS and getattr(fn, "__module__", None) == "time":
            self._report(frame, "clock", f"time.{name}()")
        elif (name in _DATETIME_NOW and isinstance(owner, type)
              and issubclass(owner, _datetime.date)):
            self._report(frame, "clock", f"{owner.__name__}.{name}()")
        elif owner is not None and isinstance(owner, _PY_RANDOM):   # subclasses too
            self._report(frame, "random", f"Python's random.{name}()")
        elif owner is not None and type(owner).__module__.startswith("numpy.random"):
            self._report(frame, "random", f"numpy.random {name}()")

    def _report(self, frame, kind, what, eager=True):
        site = f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
        self.tracer.note_effect(kind, what, None, eager, site=site)
