"""Which guards on a library object's attributes a finished trace may drop, from what the
object's class declares its methods read (Note [Attributes only some methods read]).

Note [Attributes only some methods read]
The scan (Note [Captured state] in state.py) guards every attribute of the library objects
it walks. An optimizer holds some that only a few of its methods read: `defaults` (read by
`add_param_group`, `__getstate__`; `step` reads only its `differentiable` flag) and its
hook registries (`state_dict()` runs the state-dict hooks, `load_state_dict()` the
load hooks). Modules too: `training` is read only by the forwards that name it (Dropout,
BatchNorm) and `train()`, a Linear's `in_features`/`out_features` only by `extra_repr`. A
training step calling `opt.zero_grad()` and `opt.step()` on a Linear/ReLU model read none
of it, yet checked 26 guards on it every call (17 on the optimizer). Python code reads an
attribute by naming it, so such an attribute's guards are dropped when
- its class declares, as `_attribute_reads` ({attribute: {method: items read, or None for
  all of it}}, next to the methods), which of its methods read it; the declared methods
  whose code the trace ran (called from anywhere: user code, `GradScaler.step`, a
  scheduler; the library's definitions along the MRO and the functions they wrap) read
  what they declare: `step` keeps the guards on `defaults` itself and on
  `defaults["differentiable"]`, the other items are dropped;
- no other code the trace ran, of any library, names it (a name, or a string constant
  spelling it: `d.get("_optimizer_state_dict_pre_hooks")`); a scheduler built inside the
  step reads `optimizer.defaults` so, and the forwards of Dropout or BatchNorm read
  `self.training`;
- the Note [Unread attributes] conditions hold for the user's code: it does not name the
  attribute, names no way to reach attributes by computed names (`_DYNAMIC`), and calls no
  other library's code;
- the attribute holds plain data only (numbers, strings, None, and dicts, lists and tuples
  of them: `defaults`, an empty hook registry; a registry holding hooks stays guarded),
  and no container in it was reached by the walk another way (`cfg = opt.defaults` held in
  a global, or a list shared with a parameter group): another place's reads need its
  guards. Tuples of numbers shared (Adam's `betas`, the same tuple in the group) cannot
  change and do not count.
Declared items must exist when the scan runs: `step` reads `defaults.get("differentiable",
False)`, so a `defaults` without that key keeps every guard (adding one must re-trace).
Not seen: this library's code reading such an attribute by a computed name (iterating
`vars(obj)`); none of it does today (tests/test_compile_state_method_reads.py checks that
no optimizer's `step` names `defaults` but the grad-mode wrapper).
"""
import types

from .state_guards import _SCALARS
from .state_kinds import MAX_ITEMS, _is_user, _is_user_class
from .state_unread import _DYNAMIC, _method_codes, all_names


_DECLARED = {}


def declared_reads(cls):
    """{attribute: {method: items read or None}}: the `_attribute_reads` of the library
    classes along `cls`'s MRO, a subclass's over its bases' (cached per class)."""
    out = _DECLARED.get(cls)
    if out is None:
        out = {}
        for k in reversed(cls.__mro__):
            reads = vars(k).get("_attribute_reads")
            if isinstance(reads, dict) and not _is_user_class(k):
                out.update(reads)
        _DECLARED[cls] = out
    return out


def _tree(x, out):
    """Append the containers of plain data `x` to `out`; False when `x` is not plain data
    (numbers, strings, None, and dicts, lists and tuples of them)."""
    if isinstance(x, _SCALARS):
        return True
    if not isinstance(x, (dict, list, tuple)) or len(x) > MAX_ITEMS:
        return False
    out.append(x)
    items = x.items() if isinstance(x, dict) else ((None, i) for i in x)
    return all(isinstance(k, _SCALARS) and _tree(i, out) for k, i in items)


def _immutable(x):
    """A number, string, None, or a tuple of them (nothing in it can change)."""
    return isinstance(x, _SCALARS) or type(x) is tuple and all(_immutable(i) for i in x)


def _codes_of(cls, method):
    """The code of every library definition of `method` along `cls`'s MRO, the functions
    it wraps included (`functools.wraps`: the step-hook and grad-mode wrappers)."""
    out = []
    for k in cls.__mro__:
        if _is_user_class(k) or method not in vars(k):
            continue
        f = vars(k)[method]
        f = getattr(f, "__func__", f)
        while f is not None:
            code = getattr(f, "__code__", None)
            if isinstance(code, types.CodeType) and not _is_user(f):
                out.append(code)     # (a user's function patched onto the class: its names)
            f = getattr(f, "__wrapped__", None)
    return out


def _names_word(code, word):
    """Whether `code` or the code nested in it names `word`, or spells it as a string
    (`d.get("training")`, `attrgetter("0.training")`; not a word of prose: a docstring)."""
    stack = [code]
    while stack:
        c = stack.pop()
        if word in c.co_names:
            return True
        for k in c.co_consts:
            if type(k) is str and word in k and (k == word or word in k.split(".")):
                return True
            if isinstance(k, types.CodeType):
                stack.append(k)
    return False


def unread_method_attr_guards(scanned, watch, classes=()):
    """The guards on library objects' attributes that no code the trace ran read (Note
    [Attributes only some methods read]), to drop from the path's state guards.
    `classes`: the custom autograd Functions the trace applied (their code runs later)."""
    if not scanned.method_attrs or watch.foreign_calls:
        return []
    user = all_names(list(watch.user_codes) + _method_codes(classes))
    if user & _DYNAMIC:
        return []
    ran = set(watch.ran())
    declared = {}        # (class, attribute) -> ({codes explained}, items read or None)
    out = []
    for obj, k, gs in scanned.method_attrs:
        if k in user or not gs:
            continue
        cls = type(obj)
        key = (cls, k)
        if key not in declared:
            explained, items = set(), set()
            for method, reads in declared_reads(cls)[k].items():
                codes = _codes_of(cls, method)
                explained.update(codes)
                if items is not None and ran.intersection(codes):
                    items = None if reads is None else items | set(reads)
            if items is not None and any(_names_word(c, k) for c in ran - explained):
                items = None
            declared[key] = items
        items = declared[key]
        value = vars(obj).get(k)
        containers = []
        if items is None or not _tree(value, containers) or \
                any(id(c) in scanned.again and not _immutable(c) for c in containers):
            continue
        if items and not (isinstance(value, dict) and all(
                i in value and isinstance(value[i], _SCALARS) for i in items)):
            continue         # (a missing key must re-trace when added: keep them all)
        keep = [g for g in gs if g.holder is vars(obj) and g.key == k
                or g.holder is value and g.key in items] if items else []
        out += [g for g in gs if all(g is not x for x in keep)]
    return out
