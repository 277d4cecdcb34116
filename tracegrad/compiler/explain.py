"""Introspection of compiled functions: `explain()`, `summary()`, and a path's `.code` / `.memory`.

`explain(cf)` is one readable report; per cached path: why it was traced (first call, which
guard failed where with expected vs actual, or which argument changed), its inputs, every
guard with its source line and expected outcome, captured tensors (read by reference each
call), input mutations, the passes with what each removed or merged (`graph.pass_log`) and
node counts, the forward and backward IR, the values saved for backward with shapes, dtypes
and bytes, and the memory figures. `summary(cf)` is the compact digest that
`python -m tracegrad explain` prints. Both return a `Report` (a str that displays as text).
"""
import inspect
import linecache
from dataclasses import dataclass, field

from ..ir.printer import value_names


class Report(str):
    """A str whose repr is itself, so `cf.explain()` at a prompt reads as text."""

    def __repr__(self):
        return str(self)


# -- memory figures (`path.memory`) --

@dataclass
class MemoryStats:
    """Byte counts of one compiled path. Naive = every intermediate in its own allocation
    (views own none); `plans` holds each program's memory-plan figures when it was planned."""
    input_bytes: int = 0            # forward program inputs: arguments and captured tensors
    saved_bytes: int = 0            # every value kept from forward for backward
    saved_input_bytes: int = 0      # ... of which program inputs, kept by reference
    forward_naive_bytes: int = 0
    backward_naive_bytes: int = 0
    plans: dict = field(default_factory=dict)   # "forward"/"backward" -> {figure: bytes}
    recomputed: list = field(default_factory=list)   # "%v: type (prim; %w in backward IR)"

    @property
    def naive_bytes(self):
        return self.forward_naive_bytes + self.backward_naive_bytes

    @property
    def saved_extra_bytes(self):
        """Saved bytes that would otherwise be freed after forward (not inputs)."""
        return self.saved_bytes - self.saved_input_bytes

    def __str__(self):
        s = (f"inputs {fmt_bytes(self.input_bytes)}; saved for backward "
             f"{fmt_bytes(self.saved_bytes)} ({fmt_bytes(self.saved_input_bytes)} of it inputs "
             f"kept by reference); naive intermediates: forward "
             f"{fmt_bytes(self.forward_naive_bytes)}, backward "
             f"{fmt_bytes(self.backward_naive_bytes)}")
        if self.recomputed:
            s += "\n  recomputed in backward instead of saved: " + ", ".join(self.recomputed)
        for prog, figs in self.plans.items():
            s += f"\n  {prog} plan: " + ", ".join(
                f"{k}={fmt_bytes(v) if k.endswith(('bytes', 'peak', 'bound')) else v}"
                for k, v in figs.items())
        return s


def memory_stats(path):
    from ..passes.liveness import liveness
    part = path.part
    st = MemoryStats()
    st.input_bytes = sum(v.type.nbytes for v in part.forward.inputs)
    st.saved_bytes = sum(v.type.nbytes for v in part.saved)
    st.saved_input_bytes = sum(part.saved[k].type.nbytes for k in part.saved_from_input)
    st.forward_naive_bytes = liveness(part.forward).naive_bytes
    if part.backward is not None:
        st.backward_naive_bytes = liveness(part.backward).naive_bytes
    st.recomputed = recomputed_lines(path)
    for prog in ("forward", "backward"):
        plan = getattr(path, f"{prog}_plan", None)
        if plan is not None and hasattr(plan, "summary"):
            st.plans[prog] = plan.summary()
    return st


def recomputed_lines(path):
    """Each recomputed value named as the printed IRs name it: forward (when the forward
    program still computes it) and backward (the node that recomputes it)."""
    part = path.part
    prod = {n.output: n for n in path.functional.nodes}
    fwd = value_names(part.forward)
    bwd = value_names(part.backward) if part.backward is not None else {}
    out = []
    for v in getattr(part, "recomputed", []):
        what = prod[v].prim.name if v in prod else "?"
        b = getattr(part, "recomputed_as", {}).get(v)
        if b in bwd:
            what += f"; %{bwd[b]} in backward IR"
        name = f"%{fwd[v]}" if v in fwd else "(not in forward IR)"
        out.append(f"{name}: {v.type} ({what})")
    return out


def fmt_bytes(n):
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"


# -- generated code (`path.code`) --

def path_code(path):
    def block(title, prog):
        bar = "# " + "=" * 76
        body = prog.code if prog is not None else "# (none: no input requires grad, or grad " \
                                                  "mode was off)\n"
        return f"{bar}\n# {title}\n{bar}\n{body}"
    return Report(block(f"forward program of '{path.name}'", path.forward_program) + "\n" +
                  block(f"backward program of '{path.name}'", path.backward_program))


# -- pieces shared by explain, summary and the debug dump --

def source_text(site):
    """The source line a `file:line in fn` site points at (stripped), or ''."""
    if not site:
        return ""
    loc = site.split(" in ")[0]
    fname, _, line = loc.rpartition(":")
    try:
        return linecache.getline(fname, int(line)).strip()
    except (ValueError, OSError):
        return ""


def guard_lines(path, with_source=True):
    """One or two lines per guard: `[k] kind(%v) == expected   at site` (+ the source)."""
    names = value_names(path.part.forward)
    out = []
    for k, gd in enumerate(path.guards):
        v = names.get(gd.value)
        v = f"%{v}" if v is not None else repr(gd.value)
        out.append(f"[{k}] {gd.kind}({v}) == {gd.expected!r}    at {gd.site}")
        src = source_text(gd.site) if with_source else ""
        if src:
            out.append(f"      | {src}")
    sg = path.state_guards
    if sg:                  # Python state read while tracing (Note [Captured state])
        out.append(f"[py] {len(sg)} on Python state: " + "; ".join(
            g.describe() for g in sg[:_STATE_SHOWN]) + (
            f"; and {len(sg) - _STATE_SHOWN} more" if len(sg) > _STATE_SHOWN else ""))
    return out


_STATE_SHOWN = 8


def defined_at(cf):
    fn = inspect.unwrap(getattr(cf, "fn", cf))
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "?"


def pass_lines(path):
    """The pipeline's stages in order with what each reported (compiler/pipeline.py), and
    the node count after each stage that made a graph."""
    stages = list(path.stages)
    lines = [f"  {'trace':<16} {len(path.raw.nodes):>5} nodes   (raw, before any pass)"]
    for name, st in path.log:
        cnt = ""
        if stages and stages[0][0] == name:
            cnt = f"{len(stages.pop(0)[1].nodes):>5} nodes"
        stats = ", ".join(f"{a}={b}" for a, b in st.items())
        lines.append(f"  {name:<16} {cnt:>11}   {stats}".rstrip())
    fwd, bwd = path.part.forward, path.part.backward
    lines.append(f"  forward program: {len(fwd.nodes)} nodes" + (
        f"; backward program: {len(bwd.nodes)} nodes" if bwd is not None else ""))
    return lines


def saved_lines(path):
    part = path.part
    names = value_names(part.forward)
    prod = part.forward.producers()
    lines = []
    for k, v in enumerate(part.saved):
        nm = names.get(v)
        nm = f"%{nm}" if nm is not None else repr(v)
        what = f"{nm}: {v.type} ({fmt_bytes(v.type.nbytes)})"
        if k in part.saved_from_input:
            what += "  input, kept by reference (version-checked)"
        elif v in prod:
            n = prod[v]
            what += f"  from {n.prim.name} at {n.site}"
        lines.append("  " + what)
    return lines


def input_lines(path):
    fg = path.part.forward
    names = value_names(fg)
    wrt = set(path.wrt)
    out = []
    for i, v in enumerate(fg.inputs):
        kind = "captured" if i >= path.n_args else "arg"
        rg = ", requires grad" if i in wrt else ""
        out.append(f"  %{names[v]}: {v.type}  ({kind}{rg})")
    return out


def source_lines(path):
    """Captured inputs read through a source on every call (Note [Effects])."""
    fg = path.part.forward
    names = value_names(fg)
    ins = fg.inputs

    def owner(r):
        if type(r) is tuple:
            return f"%{names[ins[r[1]]]}"
        k = next((i for i, t in enumerate(path.captured) if t is r), None)
        return f"%{names[ins[path.n_args + k]]}" if k is not None else "a tensor"
    out = [f"  %{names[ins[path.n_args + j]]} = {owner(r)}.grad" for j, r in path.sources]
    out += [f"  %{names[ins[path.n_args + j]]} = {type(h).__name__}[{k!r}]  (the tensor "
            "stored there by the last call)" for j, h, k in getattr(path, "place_sources", ())]
    where = getattr(path, "scalar_names", {})
    out += [f"  %{names[ins[path.n_args + j]]} = "
            f"{where.get((id(h), k), f'{type(h).__name__}[{k!r}]')}  (a runtime number: "
            "changing it never re-traces)" for j, h, k, *_ in path.scalar_sources]
    out += [f"  {owner(r)}.grad is None (checked)" for r in path.grad_none]
    out += [f"  {owner(r)}.grad is set (checked)" for r in path.grad_some]
    out += [f"  {owner(r)} has " + (f"the same {len(h)} gradient hook(s)" if h else
                                   "no gradient hook") + " (checked)"
            for r, h in path.hook_checks]
    return out


def effect_lines(path):
    """Autograd effects every compiled call performs again (Note [Effects])."""
    names = value_names(path.part.forward)
    ins = path.part.forward.inputs
    out = [f"  %{names[ins[pos]]}." + ("detach_()" if flag == "detach" else
                                        f"requires_grad_({flag})") + " before the program"
           for pos, flag in path.pre_effects]
    out += [f"  %{names[ins[pos]]}.grad = None before the program (zero_grad: freed first)"
            for pos in path.pre_clear]
    out += [f"  output {k}.retain_grad()" for k in path.post_retain]
    out += [f"  %{names[ins[pos]]}.retain_grad() after the program"
            for pos in getattr(path, "retain_inputs", ())]
    out += [f"  %{names[ins[pos]]}.grad = " + ("None" if k is None else f"result {k}")
            for pos, k in path.grad_set_plan]
    where = getattr(path, "scalar_names", {})   # Note [Numbers written to Python state]
    from .append_replay import APPEND
    out += [(f"  {type(h).__name__}.append(" if key is APPEND else
             f"  {where.get((id(h), key), f'{type(h).__name__}[{key!r}]')} = ")
            + (repr(c) if k is None else f"result {k} of the program")
            + (")" if key is APPEND else "") + " after the program"
            for h, key, k, c, _ in getattr(path.out_build, "writes", ())]
    out += [f"  output {k}: backward() already ran through its graph inside; no saved values,"
            f" its grad_fn ({name}) raises on a second backward" for k, name in
            path.consumed.items()]
    return out


# -- the reports --

def explain(cf, code=False):
    """The full report of compiled function `cf` (see module docstring)."""
    progs = cf.programs
    lines = [f"compiled function '{cf.name}' (defined at {defined_at(cf)}): "
             f"{len(progs)} path(s)", "stats: " + str(cf.stats)]
    for k, p in enumerate(progs):
        lines += ["", f"== path {k} ==", f"traced because: {getattr(p, 'trace_reason', '?')}"]
        lines += ["inputs:"] + input_lines(p)
        g = guard_lines(p)
        lines += [f"guards ({len(p.guards) + len(p.state_guards)}):"] + (
            ["  " + s for s in g] if g else ["  none (no data-dependent decision)"])
        if p.captured:
            fg = p.part.forward
            names = value_names(fg)
            lines.append("captured tensors (read by reference each call): " + ", ".join(
                f"%{names[v]}: {v.type}" for v in fg.inputs[p.n_args:]))
        src, eff = source_lines(p), effect_lines(p)
        if src:
            lines += ["read through a source on every call:"] + src
        if eff:
            lines += ["effects replayed on every call:"] + eff
        if p.part.mutations:
            names = value_names(p.part.forward)
            lines.append("input mutations (copied back after each call): " + ", ".join(
                f"%{names[p.part.forward.inputs[i]]} ({c} in-place write(s))"
                for i, c in p.part.mutations))
        lines += ["passes:"] + pass_lines(p)
        lines += ["forward IR:", str(p.part.forward)]
        if p.part.backward is not None:
            mem = p.memory
            lines.append(f"saved for backward: {len(p.part.saved)} value(s), "
                         f"{fmt_bytes(mem.saved_bytes)}")
            lines += saved_lines(p)
            lines += ["backward IR:", str(p.part.backward)]
        else:
            lines.append("backward: none (no input requires grad, or grad mode was off)")
        lines.append("memory: " + str(p.memory))
        if getattr(p, "backend", "numpy") != "numpy":
            from ..backends.jax import report_lines
            lines += report_lines(p)
        if code:
            lines += ["generated code:", str(p.code)]
    return Report("\n".join(lines))


def summary(cf):
    """A compact digest: paths, guards, node counts, saved bytes and retrace reasons."""
    progs = cf.programs
    st = cf.stats
    lines = [f"{cf.name} (defined at {defined_at(cf)}): {len(progs)} path(s); calls={st.calls} "
             f"cache_hits={st.cache_hits} traces={st.traces} eager_calls={st.eager_calls}"]
    for k, p in enumerate(progs):
        bwd = p.part.backward
        lines.append(f"  path {k}: traced because: {getattr(p, 'trace_reason', '?')}")
        lines += ["    guard " + s for s in guard_lines(p, with_source=False)] or \
            ["    guards: none"]
        mem = p.memory
        lines.append(f"    nodes: forward {len(p.part.forward.nodes)}, backward "
                     f"{len(bwd.nodes) if bwd is not None else '-'}; saved for backward "
                     f"{fmt_bytes(mem.saved_bytes)} ({len(p.part.saved)} value(s))")
    if st.retraces:
        lines.append(f"  retraces ({len(st.retraces)}):")
        lines += [f"    {i + 1}. {r}" for i, r in enumerate(st.retraces)]
    else:
        lines.append("  retraces: none")
    return Report("\n".join(lines))
