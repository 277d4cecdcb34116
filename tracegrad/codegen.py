"""Code generation: a Graph becomes straight-line Python over numpy.

One line per node (`v12 = k_mul(v3, v7)  # model.py:7`), kernels bound as globals, literal
attributes inlined where their repr round-trips (others bound as globals), `del` after each
value's last use, guard checks inline (raising `GuardFailed`). The source is registered with
`linecache`, so tracebacks show it; an exception raised inside is re-raised with a note
naming the user's source line of the failing node. `program.code` shows the source.
"""
import itertools
import linecache
import math

import numpy as np

from ._errors import RerunEagerly, TracegradError
from .ir.graph import Value
from .ir.interpret import GuardFailed, same_outcome
from ._quiet import quiet_enter, quiet_exit

_counter = itertools.count()


class Program:
    """An executable graph: `program(*input_arrays) -> list of output arrays`."""

    def __init__(self, graph, fn, code, filename, line_sites, quiet=False):
        self.graph = graph
        self.fn = fn
        self.code = code
        self.filename = filename
        self._line_sites = line_sites
        self.quiet = quiet

    owned = False
    rerun_on_error = False       # a path's forward: Note [Errors inside compiled programs]
    first_write_line = None      # the first generated line writing into an input (`out=iK`)

    def __call__(self, *arrays):
        if self.owned:
            return self.call_owned(list(arrays))
        return self._run(arrays)

    def call_owned(self, refs):
        """Run a program built with `owned_inputs=True` on `refs`, which it empties."""
        return self._run((refs,))

    def _run(self, args):
        token = quiet_enter() if self.quiet else None
        try:
            return self.fn(*args)
        except GuardFailed:
            raise
        except Exception as e:
            raise self.failed(e) from None
        finally:
            if token is not None:
                quiet_exit(token)

    def failed(self, e):
        """The exception to raise for `e` raised inside the program: the error eager execution
        raises for that op (same type and message), noted with the user's source line; for a
        forward program that had written into no input yet, `RerunEagerly` carrying it.

        Note [Errors inside compiled programs]
        An op that fails on its data (an index out of range, an integer division by zero)
        fails in eager execution after the ops before it ran, in-place writes to the
        caller's tensors included, and with the message of its own line. A compiled program
        orders ops its own way and copies most input mutations back only at its end, so its
        partial effects are not eager's. While the program has written into no input (its
        failing line comes before `first_write_line`, the first op the memory plan lets
        write into an input), the inputs are as the call found them: the call is then run
        again eagerly (generators rewound, cleared `.grad`s and replayed `requires_grad_`
        flags restored: compiler/runner.py), which gives eager's effects and eager's error
        exactly. The memory plan lets no op write into an input before the last op that may
        fail on its data (`Primitive.may_raise`, passes/plan_memory.py), so this holds for
        the errors users meet; an error after such a write is raised translated, as before."""
        _annotate(e, self)
        new = e
        if isinstance(e, TracegradError) and "\n  (at " in str(e):
            new = _at_node_site(e, self)     # a kernel's own error names the caller's line
        elif isinstance(e, (ValueError, IndexError, TypeError)):
            new = _as_eager_error(e, self)
            if new is not e:
                for note in getattr(e, "__notes__", ()):
                    new.add_note(note)
                new = new.with_traceback(e.__traceback__)
        if self.rerun_on_error:
            first = self.first_write_line
            if first is None or (_failing_line(e, self) or first) < first:
                return RerunEagerly(new)
        return new

    def __repr__(self):
        return f"<Program {self.graph.name}: {len(self.graph.nodes)} nodes>"


def _failing_line(e, prog):
    tb, line = e.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == prog.filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _as_eager_error(e, prog):
    """The error eager dispatch raises when this kernel fails (same type and message, naming
    the user's line of the failing op), or `e` itself if no op line is known."""
    from ._dispatch import _translate
    line = _failing_line(e, prog)
    prim = getattr(prog, "_line_prims", {}).get(line)
    if prim is None:
        return e
    err = _translate(prim, e)
    text = str(err).split("\n  (at ")[0]
    site = prog._line_sites.get(line)
    return type(err)(text + (f"\n  (at {site})" if site else ""))


def _at_node_site(e, prog):
    """`e`, a tracegrad error a kernel raised naming the innermost user frame (the compiled
    function's caller), naming instead the user's line of the failing op."""
    site = prog._line_sites.get(_failing_line(e, prog))
    if site is None:
        return e
    new = type(e)(str(e).split("\n  (at ")[0] + f"\n  (at {site})")
    for note in getattr(e, "__notes__", ()):
        new.add_note(note)
    return new.with_traceback(e.__traceback__)


def _annotate(e, prog):
    tb = e.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == prog.filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    site = prog._line_sites.get(line)
    if site and hasattr(e, "add_note"):
        e.add_note(f"tracegrad: raised in compiled code of '{prog.graph.name}' by the op from "
                   f"{site}")


_SIMPLE = (bool, int, str, type(None))


def _literal_src(x):
    """Source text for a literal if its repr round-trips, else None."""
    if isinstance(x, _SIMPLE):
        return repr(x)
    if isinstance(x, float):
        return repr(x) if math.isfinite(x) else None
    if isinstance(x, tuple):
        parts = [_literal_src(i) for i in x]
        if any(p is None for p in parts):
            return None
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    return None


class _Emitter:
    def __init__(self):
        self.globals = {"GuardFailed": GuardFailed, "_same": same_outcome, "np": np,
                        "_asarray": np.asarray}
        self._bound = {}
        self.quiet = False                   # some kernel wants numpy's warnings off

    def bind(self, obj, stem):
        key = id(obj)
        name = self._bound.get(key)
        if name is None:
            name = f"{stem}{len(self._bound)}"
            self._bound[key] = name
            self.globals[name] = obj
            self.globals.setdefault("_keep", []).append(obj)
        return name

    def operand(self, a, names):
        if isinstance(a, Value):
            return names[a]
        src = _literal_src(a)
        return src if src is not None else self.bind(a, "c")

    def attrs(self, attrs):
        parts = []
        for k, v in attrs.items():
            src = _literal_src(v)
            parts.append(f"{k}={src if src is not None else self.bind(v, 'a')}")
        return parts


def _guard_src(gd, k, name, em):
    exp = gd.expected
    if gd.kind == "bool":                    # `if not x` is `bool(x) is not True`
        return f"if {'not ' if exp else ''}{name}: raise GuardFailed({k}, not {exp!r})"
    if gd.kind == "shape":
        return f"if {name}.shape != {exp!r}: raise GuardFailed({k}, {name}.shape)"
    conv = {"item": "{n}.item()", "float": "{n}.item()", "int": "int({n}.item())",
            "tolist": "{n}.tolist()", "numpy": "{n}"}[gd.kind].format(n=name)
    e = em.bind(exp, "g")
    return f"_o = {conv}\n    if not _same(_o, {e}): raise GuardFailed({k}, _o)"


def build(graph, name=None, keep_inputs=True, plan=None, poison=False, owned_inputs=False,
          memo_inputs=()):
    """Generate and compile `graph` into a Program.

    `owned_inputs=True` generates a program that takes its input arrays as one list it
    empties (`prog.call_owned(refs)`), so each input is freed at its last use, as the values
    eager backward saved are freed node by node (Note [Owned inputs]).

    `plan` (a `passes.plan_memory` MemoryPlan) makes nodes write into dying operands, into
    mutated inputs, or into per-thread arena slots via `out=`; `poison` fills every buffer
    with NaN when its value dies (a debug mode: results must not change).

    `memo_inputs` (input positions) are read-only numbers the caller passes as the same
    array object while their value is unchanged: what the program computes from them alone
    is computed once per change (Note [Memoized scalars]).

    >>> prog = tracegrad.build(graph); outs = prog(*input_arrays)
    """
    em = _Emitter()
    arena = _Arena(graph, plan) if plan is not None and plan.slots else None
    if arena is not None:
        em.globals["_arena"] = arena
    if poison:
        em.globals["_poison"] = _poison
    names = {}
    for i, v in enumerate(graph.inputs):
        names[v] = f"i{i}"
    for n in graph.nodes:
        names[n.output] = f"v{n.output.id}"
    last = {}
    for i, n in enumerate(graph.nodes):
        for a in n.value_inputs():
            last[a] = i
    guards = {}
    for k, gd in enumerate(graph.guards):
        guards.setdefault(gd.position, []).append((k, gd))
        last[gd.value] = max(last.get(gd.value, -1), gd.position)
    from .passes.liveness import liveness
    live = liveness(graph)
    for root, end in live.last.items():      # a base stays named while views of it live
        if root in last and end < len(graph.nodes):
            last[root] = max(last[root], end)
    pinned = {v for v in graph.outputs if v is not None}
    if not owned_inputs:
        pinned |= set(graph.inputs)
    scalars_ok = _scalar_ok(graph, plan, pinned)
    fused = {} if poison else _fused_pairs(graph, plan, pinned, guards, last)
    for i, (j, _) in fused.items():          # the first result is never made
        del last[graph.nodes[i].output]
    skip = {j for j, _ in fused.values()}
    dead_after = {}
    for v, i in last.items():
        if v not in pinned:
            dead_after.setdefault(i, []).append(names[v])
    fname = name or graph.name
    filename = f"<tracegrad-{fname}-{next(_counter)}>"
    params = ", ".join(names[v] for v in graph.inputs)
    if owned_inputs:
        lines = [f"def {_ident(fname)}(_refs):"]
        if graph.inputs:
            lines += [f"    {params}{',' if len(graph.inputs) == 1 else ''} = _refs",
                      "    _refs.clear()"]
        unused = [names[v] for v in graph.inputs if v not in last and v not in pinned]
        if unused:
            lines.append(f"    del {', '.join(unused)}")
    else:
        lines = [f"def {_ident(fname)}({params}):"]
    if arena is not None:
        lines.append("    B = _arena.views()")
    poisoned = _poison_points(graph, plan) if poison else {}
    line_sites = {}
    line_prims = {}                          # generated line -> primitive (error translation)
    first_write = None                       # Note [Errors inside compiled programs]
    def node_line(i, n):
        """`vK = kernel(operands, attrs, out=...)  # site` for node `i`."""
        kernel = n.prim.kernel
        if getattr(kernel, "quiet_raw", None) is not None:
            kernel = kernel.quiet_raw        # Note [Quiet programs]
            em.quiet = True
        args = [em.operand(a, names) for a in n.inputs]
        static = n.prim.specialize(n) if n.prim.specialize is not None else None
        if static is not None:               # Note [Static kernels] in ops/primitive.py
            kernel = static
        else:
            args += em.attrs(n.attrs)
        kern = em.bind(kernel, f"k_{_ident(n.prim.name)}_")
        if plan is not None:
            if i in plan.into_input:
                args.append(f"out=i{plan.into_input[i]}")
            elif i in plan.takeover:
                args.append(f"out={names[n.inputs[plan.takeover[i]]]}")
            elif arena is not None and n.output in arena.index:
                args.append(f"out=B[{arena.index[n.output]}]")
        site = _short(n.site)
        op = _SCALAR_OPS.get(kernel) if len(args) == 2 and any(
            a in scalars_ok for a in n.inputs if isinstance(a, Value)) else None
        call = f"({args[0]} {op} {args[1]})" if op else f"{kern}({', '.join(args)})"
        if not n.output.type.shape and n.output not in scalars_ok:
            call = f"_asarray({call})"       # numpy reductions may hand back scalars
        return f"{names[n.output]} = {call}" + (f"  # {site}" if site else "")

    memo = [] if poison else _memo_nodes(graph, plan, pinned, fused, memo_inputs)
    if memo:                                 # Note [Memoized scalars]
        em.globals["_memo"] = [None]
        keys = sorted({a for i in memo for a in graph.nodes[i].value_inputs()
                       if a in graph.inputs}, key=graph.inputs.index)
        vals = ", ".join(names[graph.nodes[i].output] for i in memo) + ","
        same = " and ".join(["_m is not None"] + [f"_m[{k}] is {names[a]}"
                                                  for k, a in enumerate(keys)])
        lines += ["    _m = _memo[0]", f"    if {same}:",
                  f"        {vals} = _m[-1]", "    else:"]
        for i in memo:
            n = graph.nodes[i]
            lines.append("        " + node_line(i, n))
            line_sites[len(lines)] = n.site
            line_prims[len(lines)] = n.prim
        kept = "".join(f"{names[a]}, " for a in keys)
        lines.append(f"        _memo[0] = ({kept}({vals}),)")
    for i, n in enumerate(graph.nodes):
        for k, gd in guards.get(i, ()):
            for part in _guard_src(gd, k, names[gd.value], em).split("\n"):
                lines.append("    " + part.strip())
                line_sites[len(lines)] = gd.site
        if i in fused:                       # Note [Fused pairs] in ops/fused_pairs.py
            j, kernel = fused[i]
            if plan is not None and (i in plan.into_input or j in plan.into_input):
                first_write = first_write or len(lines) + 1
            second = graph.nodes[j]
            args = [em.operand(a, names) for a in n.inputs]
            args += [em.operand(a, names) for a in second.inputs if a is not n.output]
            spec = getattr(kernel, "specialize", None)   # Note [Static kernels]
            static = spec(n, second) if spec is not None else None
            if static is None:
                args += em.attrs(n.attrs) + em.attrs(second.attrs)
            else:
                kernel = static
            em.quiet = True
            kern = em.bind(kernel, f"k_{kernel.__name__.strip('_')}_")
            lines.append(f"    {names[second.output]} = {kern}({', '.join(args)})"
                         f"  # {_short(second.site) or ''}")
            line_sites[len(lines)] = second.site
            line_prims[len(lines)] = n.prim
        if i in fused or i in skip:
            if i in dead_after:
                lines.append(f"    del {', '.join(sorted(dead_after[i]))}")
            continue
        if i not in memo:
            if plan is not None and i in plan.into_input:
                first_write = first_write or len(lines) + 1
            lines.append("    " + node_line(i, n))
            line_sites[len(lines)] = n.site
            line_prims[len(lines)] = n.prim
        for v in poisoned.get(i, ()):
            lines.append(f"    _poison({names[v]})")
        if i in dead_after:
            lines.append(f"    del {', '.join(sorted(dead_after[i]))}")
    for k, gd in guards.get(len(graph.nodes), ()):
        for part in _guard_src(gd, k, names[gd.value], em).split("\n"):
            lines.append("    " + part.strip())
            line_sites[len(lines)] = gd.site
    outs = ", ".join(names[v] if v is not None else "None" for v in graph.outputs)
    lines.append(f"    return [{outs}]")
    code = "\n".join(lines) + "\n"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    exec(compile(code, filename, "exec"), em.globals)
    fn = em.globals[_ident(fname)]
    prog = Program(graph, fn, code, filename, line_sites, quiet=em.quiet)
    prog._line_prims = line_prims
    prog.first_write_line = first_write
    prog.owned = owned_inputs
    return prog


# Note [Owned inputs]
# A backward program called as `prog(*saved)` cannot free a saved value early: the caller's
# argument tuple and list keep every array alive until the call returns, so the program's
# peak is all saved values at once plus everything it computes. Called as
# `prog.call_owned(refs)` instead, it unpacks and empties the list: its own local names then
# hold the only references, and `del` at last use frees each value as eager backward does.


# Note [Quiet programs]
# Kernels that must not emit numpy warnings (PyTorch returns inf/nan silently) are wrapped
# to switch numpy's error state per call (Note [Quiet kernels] in _quiet.py). A
# program calls many of them in a row, so it binds the bare kernels and switches the state
# once around the whole program instead: the same results, a fraction of the cost.


# Note [Scalar temporaries]
# numpy reductions hand back numpy scalars, which the program normally wraps back into 0-d
# arrays (an array can be written with `out=`, returned, saved). A scalar that is only read by
# guards and ufuncs (`while y.norm() < 1000` computes a norm, compares it and branches) needs
# no array: the wrapping would cost more than the arithmetic.
# An operator on a numpy scalar is the ufunc (same promotion, same result) at a tenth of the
# call's cost, so binary ufuncs reading such a scalar are written as operators.
_SCALAR_GUARDS = ("bool", "item", "float", "int", "shape", "tolist")
_SCALAR_OPS = {np.add: "+", np.subtract: "-", np.multiply: "*", np.true_divide: "/",
               np.less: "<", np.less_equal: "<=", np.greater: ">", np.greater_equal: ">=",
               np.equal: "==", np.not_equal: "!="}


def _fused_pairs(graph, plan, pinned, guards, last):
    """{i: (i + 1, kernel)}: adjacent nodes run as one kernel (Note [Fused pairs]): the first
    result read only by the second, not an output, no guard before the second, and no
    memory-plan decision about either."""
    from .ops.fused_pairs import PAIRS
    out = {}
    planned = set()
    if plan is not None:
        planned = set(plan.takeover) | set(plan.into_input)
        planned |= {i for i, n in enumerate(graph.nodes) if n.output in plan.slots}
    nodes = graph.nodes
    for i in range(len(nodes) - 1):
        a, b = nodes[i], nodes[i + 1]
        kernel = PAIRS.get((a.prim.name, b.prim.name))
        if (kernel is None or a.output in pinned or last.get(a.output) != i + 1
                or sum(x is a.output for x in b.inputs) != 1 or b.inputs[0] is not a.output
                or guards.get(i + 1) or i in planned or i + 1 in planned or i - 1 in out):
            continue
        out[i] = (i + 1, kernel)
    return out


# Note [Memoized scalars]
# A training step reads its hyper-parameters per call (`_effects.hyper`): the runner hands
# each to the program as a 0-d float64 array, the same array object while the Python number
# it came from is the same object. From them the program computes a handful of
# 0-d values on every call (`momentum != 0` for a guard, `-lr` cast to float32, `1 - beta1`),
# each a numpy call of about a microsecond on a tiny step. Those that depend on such inputs
# alone are computed in a block at the top of the program, run only when one of those arrays
# is not the one of the last call (compared by identity; the memo keeps them alive, so an
# identity is never reused); otherwise the last results are taken. The block holds only 0-d
# results of ops that cannot fail, draw random numbers or alias, that no later op writes
# into (no `out=`) and that are neither outputs nor viewed by one, so a kept result is never
# changed. The guards reading them stay where they were, so guard order (Note [Paths]) is
# unchanged. The generic `CompiledPath.run` makes fresh arrays per call: it recomputes.
# A 0-d result of no operand at all (the constant 1.0 seeding backward of a returned loss,
# a `full` or `zeros` scalar) obeys the same rules and is made on the first call only.
def _memo_nodes(graph, plan, pinned, fused, memo_inputs):
    """Indices of the nodes computed in the memoized block (Note [Memoized scalars])."""
    from .ops.primitive import may_fail
    from .passes.liveness import liveness
    ok = {graph.inputs[k] for k in memo_inputs}
    live = liveness(graph)
    storage = live.storage_of
    planned = set()
    written = set(live.escaping)             # storage leaving the program or written by out=
    if plan is not None:
        planned = set(plan.takeover) | set(plan.into_input)
        planned |= {i for i, n in enumerate(graph.nodes) if n.output in plan.slots}
        for i, k in plan.takeover.items():
            a = graph.nodes[i].inputs[k]
            written.add(storage.get(a, a))
    skip = set(fused) | {j for j, _ in fused.values()}
    out = []
    for i, n in enumerate(graph.nodes):
        ins = n.value_inputs()
        p = n.prim
        # (no operand at all: a constant, made once: Note [Memoized scalars])
        if (n.output.type.shape or i in skip or i in planned or p.impure
                or p.aliases is not None or p.overwrites or n.output in pinned
                or may_fail(n) or any(a not in ok for a in ins)):
            continue
        ok.add(n.output)
        out.append(i)
    if written:                              # a kept result must never be written later
        bad = {graph.nodes[i].output for i in out
               if storage.get(graph.nodes[i].output, graph.nodes[i].output) in written}
        while bad:                           # and neither may what is computed from it
            more = {graph.nodes[i].output for i in out
                    if any(a in bad for a in graph.nodes[i].value_inputs())} - bad
            out = [i for i in out if graph.nodes[i].output not in bad]
            bad = more
    return out


def _scalar_ok(graph, plan, pinned):
    """0-d values the program may leave as numpy scalars (Note [Scalar temporaries])."""
    written = set()
    if plan is not None:
        for i, k in plan.takeover.items():
            written.add(graph.nodes[i].inputs[k])
    ok = {n.output for n in graph.nodes if not n.output.type.shape} - pinned - written
    for n in graph.nodes:
        k = n.prim.kernel
        if type(getattr(k, "quiet_raw", k)) is not np.ufunc or n.prim.aliases is not None:
            ok.difference_update(n.value_inputs())
    for gd in graph.guards:
        if gd.kind not in _SCALAR_GUARDS:
            ok.discard(gd.value)
    return ok


def _ident(s):
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in s)
    return out if out and not out[0].isdigit() else "f_" + out


def _short(site):
    if not site:
        return ""
    import os
    path, _, rest = site.partition(":")
    return f"{os.path.basename(path)}:{rest}"


class _Arena:
    """Per-thread scratch memory for a plan's arena slots (never shared by two threads)."""

    def __init__(self, graph, plan):
        import threading
        self.index = {}
        self.layout = []
        for k, (root, (off, nbytes)) in enumerate(sorted(plan.slots.items(),
                                                         key=lambda kv: kv[1][0])):
            self.index[root] = k
            self.layout.append((off, root.type.shape, root.type.dtype.np))
        self.nbytes = plan.arena_bytes
        self.local = threading.local()

    def views(self):
        v = getattr(self.local, "views", None)
        if v is None:
            raw = np.empty(self.nbytes + 64, np.uint8)
            base = (-raw.ctypes.data) % 64           # 64-byte aligned slots
            v = []
            for off, shape, dt in self.layout:
                n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
                v.append(raw[base + off: base + off + n].view(dt).reshape(shape))
            self.local.views = v
        return v


def _poison(a):
    if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.flags.writeable:
        a.fill(np.nan)


def _poison_points(graph, plan):
    """node index -> storages that die there and may be overwritten with NaN."""
    from .passes.liveness import liveness
    live = liveness(graph)
    taken = set()
    if plan is not None:
        for i, k in plan.takeover.items():
            taken.add(graph.nodes[i].inputs[k])
        # (an update chain's ops live in the input they update: Note [Update chains])
        taken.update(graph.nodes[i].output for i in plan.into_input)
    out = {}
    for r, last in live.last.items():
        if r in live.escaping or r in taken or last >= len(graph.nodes):
            continue
        out.setdefault(last, []).append(r)
    return out
