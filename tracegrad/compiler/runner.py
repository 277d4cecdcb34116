"""A generated `call(args)` per compiled path: its checks and its run in one function.

Note [Runner]
`CompiledPath.resolve` and `CompiledPath.run` are generic: on every call they loop over the
path's captured tensors, sources, effects, mutations and outputs and ask which needs what.
All of that is fixed when the path is built, so we generate one straight-line function
instead, `call(args) -> (outputs, None)`:
- the checks of `resolve`: Python state (compiler/state.py), `.grad` read per call
  (sources) and "is None" / "is set" of the `.grad`s the trace saw, numbers read per call
  (runtime hyper-parameters), captured tensors' metadata, no argument sharing memory with a
  captured tensor;
- the run: `requires_grad_` replayed, `.grad`s cleared before the program (zero_grad), the
  forward program (numpy's warnings off around it, errors mapped back to the user's line
  exactly as `Program.__call__` does), each mutation copied back into its input and its
  version bumped, outputs wrapped, the backward node attached, consumed graphs marked,
  `retain_grad` and `.grad` assignments replayed, Python-only calls replayed.
When a check fails it returns `(None, why)` with the reason the generic `resolve` gives
(the slow path, taken only on a miss). The Python state checks are the state checker's
own lines (state_guards.checker_source), inlined; fused_entry.py puts these lines after
the entry's key check in one function. Paths whose outputs are views of inputs, or that
guard tensor attributes Python read, keep the generic pair. On the tiny
MLP training step this saves about a quarter of the per-call work outside the program.
"""
import numpy as np

from .._effects import is_number
from .._errors import RerunEagerly
from .._tensor_storage import OWNER_BASES, _root
from .._tensor import Tensor, VersionCounter
from ..ir.interpret import GuardFailed
from .._quiet import _IGNORING, _NP_ERRSTATE, _ignoring, quiet_enter, quiet_exit
from .backward_node import consumed_node
from .tensor_places import read as read_place
from .state_guards import checker_source
from .warning_replay import would_raise


def build_runner(path):
    """`call(args) -> (outputs, why)` generated for `path`, or None when the generic
    `CompiledPath.call` must serve."""
    src = runner_source(path)
    if src is None:
        return None
    lines, env = src
    code = "\n".join(["def call(args):"] + lines) + "\n"
    exec(compile(code, f"<tracegrad runner {path.name}>", "exec"), env)
    call = env["call"]
    call.code = code
    call.path = path                     # (what compiler/fused_entry.py checks it was built for)
    return call


def runner_source(path, miss="return _miss(args)", ret="return outs, None", unpack=True,
                  owner_ids=False):
    """(body lines, globals) of `call(args)` for `path` (Note [Runner]), or None: `miss` is
    the statement a failed check runs (before anything changed), `ret` the one returning
    `outs`; `unpack=False` when the caller's code already bound `a0, a1, ...`, and
    `owner_ids` when it also bound `qa0, qa1, ...` to the ids of their arrays' owners."""
    if path.attr_guards or any(chain for _, chain in path.alias_out.values()):
        return None
    part, prog = path.part, path.forward_program
    n_args, n_cap = path.n_args, len(path.captured)
    names = [f"a{i}" for i in range(n_args)] + [f"c{i}" for i in range(n_cap)]
    env = {"_fn": prog.fn, "_prog": prog, "_GuardFailed": GuardFailed, "_qe": quiet_enter,
           "_qx": quiet_exit, "_wrap": Tensor._wrap, "_asarray": np.asarray, "_array": np.array,
           "_copyto": np.copyto, "_attach": path._attach,
           "_miss": path._miss, "_root": _root, "_OWN": OWNER_BASES,
           "_f64": _f64, "_i64": _i64, "_consumed": consumed_node, "_number": is_number,
           "_Rerun": RerunEagerly, "_read_place": read_place, "_new": object.__new__,
           "_T": Tensor, "_VC": VersionCounter}
    env.update({f"c{i}": t for i, t in enumerate(path.captured)})   # fixed unless sourced
    lines = []
    if n_args and unpack:
        lines.append(f"    {', '.join(names[:n_args])}{',' if n_args == 1 else ''} = args")
    if path.warnings:                    # Note [Warnings replayed]
        env["_werr"], env["_warns"] = would_raise, path.warnings
        lines.append(f"    if _werr(_warns): {miss}")
    if path.state_guards:                # the state checker's lines, inlined (its globals
        state_lines, state_env = checker_source(path.state_guards, miss, "S")   # S-named)
        env.update(state_env)
        lines += state_lines

    def owner(r):                        # ("arg", i) or a tensor bound in env
        if type(r) is tuple:
            return f"a{r[1]}"
        env[f"o{id(r)}"] = r
        return f"o{id(r)}"
    for i, (r, hooks) in enumerate(path.hook_checks):   # the same gradient hooks
        if not hooks:                    # (none: the list `register_hook` makes is empty)
            lines.append(f"    if {owner(r)}.__dict__.get('_leaf_hooks'): {miss}")
            continue
        env.update({f"g{i}_{k}": fn for k, fn in enumerate(hooks)})
        same = [f"len(hk) != {len(hooks)}"] + [f"hk[{k}] is not g{i}_{k}"
                                              for k in range(len(hooks))]
        lines += [f"    hk = {owner(r)}.__dict__.get('_leaf_hooks') or ()",
                  f"    if {' or '.join(same)}: {miss}"]
    for r in path.grad_none:
        lines.append(f"    if {owner(r)}._grad is not None: {miss}")
    for r in path.grad_some:
        lines.append(f"    if {owner(r)}._grad is None: {miss}")
    for j, r in path.sources:
        lines += [f"    c{j} = {owner(r)}._grad", f"    if c{j} is None: {miss}"]
    for j, holder, key in path.place_sources:   # Note [Tensors written to Python state]
        env[f"ph{j}"], env[f"pk{j}"] = holder, key
        lines += [f"    c{j} = _read_place(ph{j}, pk{j})", f"    if c{j} is None: {miss}"]
    scalar = {j for j, *_ in path.scalar_sources}
    for j, holder, key, index, n, narrow in path.scalar_sources:
        # (one tuple swapped whole, so threads calling at once never mix two values)
        env[f"h{j}"], env[f"k{j}"], env[f"p{j}"] = holder, key, [(_UNSET, None)]
        get = f"h{j}.get(k{j})" if isinstance(holder, dict) else f"h{j}[k{j}]"
        lines.append(f"    v = {get}")
        if index is not None:            # an item of a tuple of n: (betas[0], betas[1]),
            # or of a list of n (`g["betas"] = [0.9, 0.99]`: Adam unpacks either)
            lines += [f"    if type(v) not in (tuple, list) or len(v) != {n}: {miss}",
                      f"    v = v[{index}]"]
        lines += [f"    last = p{j}[0]", "    if v is not last[0]:",
                  f"        if not _number(v, {narrow!r}): {miss}",
                  f"        last = p{j}[0] = (v, {'_i64' if narrow == 'int' else '_f64'}(v))",
                  f"    c{j} = last[1]"]
    data = {}
    # Note [Checked arrays]: on the numpy backend the arrays found valid on the last call
    # are kept, and a captured tensor still holding the same array object needs only its
    # shape, dtype object and requires_grad flag checked (an array's owner is fixed, and its
    # layout only changes with its shape; numpy lets `a.shape = ...` reshape an array in
    # place, as through `np.asarray(p)`). The JAX backend moves and adopts arrays by
    # their reference counts, so there nothing is kept and every call checks everything.
    keep = getattr(prog, "call_tensors", None) is None
    tensor_caps = [j for j in range(n_cap) if j not in scalar]
    if keep and tensor_caps:            # (globals: one dict lookup each, no subscript)
        env.update({f"_sn{j}": None for j in tensor_caps})   # captured j's array last valid
        env["_roots"] = frozenset()     # the ids of those arrays' owners
    for j, (t, m) in enumerate(zip(path.captured, path.captured_meta)):
        if j in scalar:
            data[f"c{j}"] = f"c{j}"                     # already an array
            continue
        shape, dtype, rg, c_order = m
        env[f"s{j}"], env[f"d{j}"] = shape, dtype
        # (dtype: the same object almost always; `!=` only when not)
        cond = (f"d.shape != s{j} or (d.dtype is not d{j} and d.dtype != d{j}) "
                f"or c{j}._rg is not {rg}")
        if len(shape) >= 2:
            cond += f" or {'not ' if c_order else ''}d.flags.c_contiguous"
        lines.append(f"    d = c{j}._data")
        if keep:
            lines += [f"    if d is not _sn{j} or d.shape != s{j} or d.dtype is not d{j}:",
                      f"        if {cond}: {miss}",
                      f"        if d is not _sn{j}: _seen_new({j}, d)",
                      f"    elif c{j}._rg is not {rg}: {miss}"]
        else:
            lines.append(f"    if {cond}: {miss}")
            if n_args:                   # the id of the array owning its memory, no reference
                lines.append(f"    q{j} = id(d) if type(d.base) in _OWN else id(_root(d))")
        data[f"c{j}"] = f"c{j}._data"
    if tensor_caps:
        lines.append("    d = None")   # no local reference left (JAX: Note [Aligned host arrays])
    if n_args and tensor_caps:           # no argument may share memory with a captured one
        if keep:
            env["_seen_new"] = _seen_updater(env, tensor_caps)
            lines.append("    roots = _roots")
        else:
            lines.append(f"    roots = {{{', '.join(f'q{j}' for j in tensor_caps)}}}")
        for i in range(n_args):          # (an array owning its memory: no _root call)
            if owner_ids:
                lines.append(f"    if qa{i} in roots: {miss}")
                continue
            lines += [f"    d = a{i}._data",
                      f"    if id(d if type(d.base) in _OWN else _root(d)) in roots: {miss}"]
        lines.append("    d = None")
    elif keep and tensor_caps:
        env["_seen_new"] = _seen_updater(env, tensor_caps)
    restore = []       # on GuardFailed or RerunEagerly: as the call found them (another
    # path, the re-trace or the eager run starts from the call's own state)
    for k, (pos, flag) in enumerate(path.pre_effects):
        if flag == "detach":             # Note [detach_ of an argument] in trace_plan.py
            lines += [f"    rg{k}, gf{k} = {names[pos]}._rg, {names[pos]}._grad_fn",
                      f"    {names[pos]}.detach_()"]
            restore.insert(0, f"{names[pos]}._rg, {names[pos]}._grad_fn = rg{k}, gf{k}")
            continue
        lines += [f"    rg{k} = {names[pos]}._rg", f"    {names[pos]}.requires_grad_({flag})"]
        restore.insert(0, f"{names[pos]}._rg = rg{k}")
    for pos in path.pre_clear:           # zero_grad first: old gradients go before
        if pos in path.pre_clear_held:   # Note [Clearing before the program] in trace_plan.py
            lines.append(f"    pc{pos} = {names[pos]}._grad")
            restore.insert(0, f"{names[pos]}._grad = pc{pos}")
        lines.append(f"    {names[pos]}._grad = None")
    if getattr(prog, "call_tensors", None) is not None:     # the JAX backend's entry
        ins = names[:n_args] + [f"_wrap(c{j})" if j in scalar else f"c{j}" for j in range(n_cap)]
        call = f"_prog.call_tensors([{', '.join(ins)}])"
    else:
        args_data = [f"{n}._data" for n in names[:n_args]] + [data[n] for n in names[n_args:]]
        call = f"_fn({', '.join(args_data)})"
    spec = path.speculation               # Note [Speculative backward] in speculation.py
    if spec is not None and part.backward is not None:
        env["_spec"] = spec
        n_res = len(part.forward.outputs)
        fcall = call.replace("_prog.", "sp.").replace("_fn(", "sp.fn(")
        body = ["    sp = _spec.start() if _spec.on else None", "    st = None", "    try:",
                "        if sp is None:", f"            res = {call}", "        else:",
                f"            res = {fcall}", f"            if len(res) > {n_res}:",
                f"                st, res = res[{n_res}:], res[:{n_res}]",
                "    except _GuardFailed:"]
    else:
        spec = None
        body = ["    try:", f"        res = {call}", "    except _GuardFailed:"]
    body += [f"        {r}" for r in restore] + ["        raise", "    except Exception as e:",
                                                 "        err = _prog.failed(e)"]
    if restore:                          # Note [Errors inside compiled programs] in codegen.py
        body += ["        if type(err) is _Rerun:"] + [f"            {r}" for r in restore]
    body.append("        raise err from None")
    if prog.quiet and _NP_ERRSTATE is not None:   # quiet_enter / quiet_exit, inlined
        env.update(_esg=_NP_ERRSTATE.get, _ess=_NP_ERRSTATE.set, _esr=_NP_ERRSTATE.reset,
                   _IGN=_IGNORING, _ign=_ignoring)
        body = ["    tok = _esg()", "    tok = _ess(_IGN.get(tok) or _ign(tok))"] + body + [
            "    finally:", "        _esr(tok)"]
    elif prog.quiet:
        body = ["    tok = _qe()"] + body + ["    finally:", "        _qx(tok)"]
    lines += body
    for k, (pos, count) in enumerate(part.mutations):
        t = names[pos]
        r = f"res[{path._mut_start + k}]"      # (the program wrote into it: the same array)
        lines += [f"    if {r} is not {t}._data:",
                  f"        _copyto({t}._data, {r}, casting='unsafe')",
                  f"    {t}._vc.v += {count}"]
    for k in range(part.n_user):         # each output: fresh, an input, a repeat or a copy
        if k in path.dup_out:
            lines.append(f"    o{k} = o{path.dup_out[k]}")
        elif k in path.alias_out:
            lines.append(f"    o{k} = {names[path.alias_out[k][0]]}")
        else:                            # Note [Outputs made inline]
            arr = f"_array(res[{k}])" if k in path.copy_out else f"_asarray(res[{k}])"
            # results the trace made under inference_mode are inference tensors (path.py);
            # Note [Versions of fresh outputs] in path.py
            fields = dict(_WRAPPED, _inference=k in path.inference_out)
            version = path.out_versions.get(k, 0)
            lines += [f"    o{k} = t = _new(_T)", f"    t._data = {arr}",
                      f"    t._vc = vc = _new(_VC)", f"    vc.v = {version}"]
            lines += [f"    t.{name} = {value!r}" for name, value in fields.items()]
    lines.append(f"    outs = [{', '.join(f'o{k}' for k in range(part.n_user))}]")
    if part.backward is not None:
        keep = len(path.replay.keep)
        sl = path._saved_slice
        kept = f"res[{-keep}:]" if keep else "()"
        ins = [f"_wrap(c{j})" if j in scalar else f"c{j}" for j in range(n_cap)]
        # the trace decided that gradients flow (the entry key fixes the grad mode)
        lines += [f"    nd = _attach([{', '.join(names[:n_args] + ins)}], outs, "
                  f"res[{sl.start}:{sl.stop}], {kept})"]
        if spec is not None:
            lines += ["    if st is not None:", "        _spec.stashed(nd, st)"]
    if path.view_out:                    # views of a returned result, made again on it
        from .path import _view
        env["_view"] = _view
        for k, (j, chain) in path.view_out.items():
            env[f"vc{k}"] = chain
            lines += [f"    t = outs[{j}]", f"    for p, a in vc{k}:", "        t = _view(p, t, a)",
                      f"    outs[{k}] = t"]
        lines += [f"    outs[{k}] = outs[{j}]" for k, j in path.dup_of_view.items()]
    for k in path.post_retain:
        lines += [f"    if outs[{k}].requires_grad:", f"        outs[{k}].retain_grad()"]
    for pos in path.retain_inputs:       # `a.retain_grad()` on a non-leaf argument
        lines += [f"    if {names[pos]}.requires_grad:", f"        {names[pos]}.retain_grad()"]
    for k, name in path.consumed.items():
        leaves = [names[i] for i in path.consumed_leaves[k]]
        lines += [f"    node = _consumed({name!r}, [{', '.join(leaves)}])",
                  f"    outs[{k}]._grad_fn, outs[{k}]._rg = node, True"]
    for pos, k in path.grad_set_plan:
        lines.append(f"    {names[pos]}._grad = {'None' if k is None else f'outs[{k}]'}")
    for i, (obj, method, a, kw) in enumerate(path.replays):
        env[f"r{i}"] = (method, obj, a, kw)
        lines += [f"    m, o, a, kw = r{i}", "    m(o, *a, **kw)"]
    lines.append(f"    {ret}")
    return lines, env


_UNSET = object()

# Note [Outputs made inline]
# A fresh output is `Tensor._wrap(array)` written out in the runner (about 60 ns of a
# call's frame saved per output, five outputs on the tiny training step): a new object,
# its array, a new version counter at the version the trace returned it with, and these
# slots as `_wrap` sets them (tests/test_compile_runner.py checks they still agree).
_WRAPPED = {"_rg": False, "_grad_fn": None, "_base": None, "_output_nr": 0}


def _seen_updater(env, caps):
    """`new(j, d)`: array `d` of captured tensor j passed the checks (Note [Checked arrays]);
    kept as the runner's global `_sn{j}`. The owners' ids are published before the array,
    so a thread that finds `d` kept also finds its owner among the roots."""
    def new(j, d):
        now = [d if k == j else env[f"_sn{k}"] for k in caps]
        env["_roots"] = frozenset(id(_root(a)) for a in now if a is not None)
        env[f"_sn{j}"] = d
    return new


def _f64(v):
    """A number read per call, as the 0-d float64 array the program takes (never written:
    the program only reads it)."""
    return np.array(v, dtype=np.float64)


def _i64(v):
    """An int argument read per call, as the 0-d int64 array the program takes."""
    return np.array(v, dtype=np.int64)
