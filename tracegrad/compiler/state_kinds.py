"""What kind of thing the state scan (compiler/state.py) meets: user or library code,
modules, plain objects, plain data; and the limits of the walk."""
import inspect
import types

from .._effects import is_library_module
from .state_guards import _SCALARS
from .state_slots import slot_names

MAX_ITEMS = 4096        # larger containers are not walked
MAX_DEPTH = 3           # user functions reached through user functions
MAX_NEST = 4            # containers and objects reached through containers and objects
# their objects hold user state (parameters; a GradScaler's scale, made at its first use)
_WALKED_LIBRARY = ("tracegrad.optim", "tracegrad.utils", "tracegrad.distributions",
                   "tracegrad.amp")


def _dotted(where, k):
    """Parameter names as `named_parameters` gives them (`0.weight`, `fc.bias`)."""
    return k if "." not in where else where.split(".", 1)[1] + "." + k


def _names(code):
    """Global and attribute names read by `code` and by the code objects nested in it."""
    out = list(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out += _names(c)
    return out


def probe(obj, name):
    """Note [Probing user objects]
    `getattr(obj, name, None)` for the compiler's own questions about an object the user
    handed it or its function reads ("is this a module?"), without running the object's
    `__getattr__` when `name` is not a real attribute: a user's `__getattr__` that looks
    names up in a dict raises KeyError, not AttributeError, or does work, and eager code
    never asked. So the compiled call raised where eager ran."""
    try:
        inspect.getattr_static(obj, name)
        return getattr(obj, name, None)
    except Exception:                    # noqa: BLE001 -- no such attribute, for us
        return None


def _is_module(v):
    return callable(probe(v, "named_parameters")) and "_modules" in getattr(
        v, "__dict__", {})


def _is_compiled_function(v):
    from .function import CompiledFunction
    return isinstance(v, CompiledFunction)


def _is_library_name(mod):
    return is_library_module(mod) and not (mod or "").startswith(_WALKED_LIBRARY)


def _is_user(fn):
    return not is_library_module(fn.__module__)


def _pure(x, nest):
    """Plain data: a scalar, or (within `nest` levels) a list, tuple or dict of it."""
    if isinstance(x, _SCALARS):
        return True
    if type(x) in (list, tuple, dict) and nest > 0 and len(x) <= MAX_ITEMS:
        items = list(x.items()) if type(x) is dict else [(None, i) for i in x]
        return all(isinstance(k, _SCALARS) and _pure(i, nest - 1) for k, i in items)
    return False


# Note [Data beyond the walk]
# The walk stops MAX_NEST containers deep and at containers of more than MAX_ITEMS items,
# where it used to guard nothing more than the container's identity: a setting four dicts
# down a config (`cfg["train"]["aug"]["noise"]["std"]`, read through `self.cfg` or a
# closure) or an item of a long list of class weights, changed in place between calls,
# left a cached path on the first call's value. Such a container, when it holds only plain
# data (scalars in lists, tuples and dicts, up to DATA_ITEMS values in all), is guarded by
# a deep copy: the place must hold the same container with equal contents. (Containers
# holding tensors or objects beyond the walk stay unguarded: pass them as arguments.)
DATA_ITEMS = 100_000


def _plain_data(v):
    """Whether `v` is scalars in lists, tuples and dicts, DATA_ITEMS values at most."""
    stack, n = [v], 0
    while stack:
        x = stack.pop()
        n += 1
        if n > DATA_ITEMS:
            return False
        if type(x) in (list, tuple):
            stack.extend(x)
        elif type(x) is dict:
            for k, i in x.items():
                if not isinstance(k, _SCALARS):
                    return False
                stack.append(i)
        elif not isinstance(x, _SCALARS):
            return False
    return True


def _is_user_class(cls):
    return not is_library_module(cls.__module__)


def _is_plain_object(v, callable_ok=False):
    t = type(v)
    return ((hasattr(v, "__dict__") or (_is_user_class(t) and bool(slot_names(t))))
            and (callable_ok or not callable(v)) and not _is_library_name(t.__module__))
