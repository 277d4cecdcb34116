"""A generated `run(args)` per compiled path (Note [Runner]).

Note [Runner]
`CompiledPath.run` is generic: it loops over the path's input mutations and outputs and asks
which output needs what, on every call. All of that is fixed when the path is built, so for
the common case (every output a fresh tensor) we generate a straight-line function instead:
unpack the argument tensors, call the forward program (numpy's warnings off around it, errors
mapped back to the user's line exactly as `Program.__call__` does), copy each mutation back
into its input and bump its version, wrap the outputs, attach the backward node. On a small
training step it saves about 1.5 us per call of the generic version's bookkeeping. Paths
whose outputs alias inputs, repeat or view each other keep the generic `run`.
"""
import numpy as np

from .. import _mode
from .._tensor import Tensor
from ..ir.interpret import GuardFailed
from ..ops.elementwise import quiet_enter, quiet_exit


def build_runner(path):
    """`run(args) -> outputs` generated for `path`, or None when the generic one must serve."""
    if not path._plain_outs or path.view_out:
        return None
    part, prog = path.part, path.forward_program
    n_args = path.n_args
    names = [f"a{i}" for i in range(n_args)] + [f"c{i}" for i in range(len(path.captured))]
    env = {"_fn": prog.fn, "_prog": prog, "_GuardFailed": GuardFailed, "_qe": quiet_enter,
           "_qx": quiet_exit, "_wrap": Tensor._wrap, "_asarray": np.asarray,
           "_copyto": np.copyto, "_inference": _mode.inference_enabled, "_attach": path._attach}
    env.update({f"c{i}": t for i, t in enumerate(path.captured)})   # same objects every call
    lines = ["def run(args, captured=None):"]   # captured: fixed objects here (no sources)
    if n_args:
        lines.append(f"    {', '.join(names[:n_args])}{',' if n_args == 1 else ''} = args")
    call = f"_fn({', '.join(n + '._data' for n in names)})"
    body = ["    try:", f"        res = {call}", "    except _GuardFailed:", "        raise",
            "    except Exception as e:", "        raise _prog.failed(e) from None"]
    if prog.quiet:
        body = ["    tok = _qe()"] + body + ["    finally:", "        _qx(tok)"]
    lines += body
    for k, (pos, count) in enumerate(part.mutations):
        t = names[pos]
        lines += [f"    r, d = res[{path._mut_start + k}], {t}._data",
                  "    if r is not d:", "        _copyto(d, r, casting='unsafe')",
                  f"    {t}._vc.v += {count}"]
    outs = ", ".join(f"_wrap(_asarray(res[{k}]))" for k in range(part.n_user))
    lines += [f"    outs = [{outs}]", "    if _inference():", "        for o in outs:",
              "            o._inference = True"]
    if part.backward is not None:
        keep = len(path.replay.keep)
        sl = path._saved_slice
        kept = f"res[{-keep}:]" if keep else "()"
        # the trace decided that gradients flow (the entry key fixes the grad mode)
        lines += [f"    _attach([{', '.join(names)}], outs, res[{sl.start}:{sl.stop}], "
                  f"{kept})"]
    lines.append("    return outs")
    code = "\n".join(lines) + "\n"
    exec(compile(code, f"<tracegrad runner {path.name}>", "exec"), env)
    run = env["run"]
    run.code = code
    return run
