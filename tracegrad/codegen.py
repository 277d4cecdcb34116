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

from .ir.graph import Value
from .ir.interpret import GuardFailed, same_outcome

_counter = itertools.count()


class Program:
    """An executable graph: `program(*input_arrays) -> list of output arrays`."""

    def __init__(self, graph, fn, code, filename, line_sites):
        self.graph = graph
        self.fn = fn
        self.code = code
        self.filename = filename
        self._line_sites = line_sites

    def __call__(self, *arrays):
        try:
            return self.fn(*arrays)
        except GuardFailed:
            raise
        except Exception as e:
            _annotate(e, self)
            raise

    def __repr__(self):
        return f"<Program {self.graph.name}: {len(self.graph.nodes)} nodes>"


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
    if gd.kind == "bool":
        return f"if bool({name}) is not {exp!r}: raise GuardFailed({k}, not {exp!r})"
    if gd.kind == "shape":
        return f"if {name}.shape != {exp!r}: raise GuardFailed({k}, {name}.shape)"
    conv = {"item": "{n}.item()", "float": "{n}.item()", "int": "int({n}.item())",
            "tolist": "{n}.tolist()", "numpy": "{n}"}[gd.kind].format(n=name)
    e = em.bind(exp, "g")
    return f"_o = {conv}\n    if not _same(_o, {e}): raise GuardFailed({k}, _o)"


def build(graph, name=None, keep_inputs=True):
    """Generate and compile `graph` into a Program.

    >>> prog = tracegrad.build(graph); outs = prog(*input_arrays)
    """
    em = _Emitter()
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
    pinned = {v for v in graph.outputs if v is not None} | set(graph.inputs)
    dead_after = {}
    for v, i in last.items():
        if v not in pinned:
            dead_after.setdefault(i, []).append(names[v])
    fname = name or graph.name
    filename = f"<tracegrad-{fname}-{next(_counter)}>"
    lines = [f"def {_ident(fname)}({', '.join(names[v] for v in graph.inputs)}):"]
    line_sites = {}
    for i, n in enumerate(graph.nodes):
        for k, gd in guards.get(i, ()):
            for part in _guard_src(gd, k, names[gd.value], em).split("\n"):
                lines.append("    " + part.strip())
                line_sites[len(lines)] = gd.site
        kern = em.bind(n.prim.kernel, f"k_{_ident(n.prim.name)}_")
        args = [em.operand(a, names) for a in n.inputs] + em.attrs(n.attrs)
        site = _short(n.site)
        call = f"{kern}({', '.join(args)})"
        if not n.output.type.shape:          # numpy reductions may hand back scalars
            call = f"_asarray({call})"
        lines.append(f"    {names[n.output]} = {call}" + (f"  # {site}" if site else ""))
        line_sites[len(lines)] = n.site
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
    return Program(graph, fn, code, filename, line_sites)


def _ident(s):
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in s)
    return out if out and not out[0].isdigit() else "f_" + out


def _short(site):
    if not site:
        return ""
    import os
    path, _, rest = site.partition(":")
    return f"{os.path.basename(path)}:{rest}"
