"""The JAX backend: `tracegrad.compile(fn, backend="jax")` runs each compiled path on XLA.

Each path's final forward and backward graphs (after functionalize, the VJP pass, partition
and the cleanup passes; memory planning is XLA's job here) are lowered to functions over
jax.numpy (lower.py, one rule per primitive in rules_*.py, the table in table.py) and
compiled once with `jax.jit` (program.py); a custom autograd.Function's opaque primitive
runs its Python forward through `jax.pure_callback` (callback.py). Guards, path selection,
re-trace reasons and the compiled backward node are the compiler's, unchanged. A path holding
a primitive that cannot be lowered runs on the numpy backend, with one warning naming the
primitive.

The compiler's one hook is `build_path_programs(path, name)`, called by
`CompiledPath._plan_and_build` when `path.backend == "jax"`.
"""
import warnings


def require_jax():
    """Import jax or raise ImportError with the install hint."""
    try:
        import jax  # noqa: F401
    except ImportError:
        raise ImportError("backend='jax' needs JAX: pip install tracegrad[jax] "
                          "(or pip install jax jaxlib)") from None


def build_path_programs(path, name, data_parallel=False):
    """Set `path.forward_program` / `path.backward_program` to JaxPrograms built from
    `path.part`; returns False (after one warning naming the primitive) when the path must use
    the numpy backend instead."""
    from .program import JaxProgram
    from .saved import plan_packing
    from .table import Unsupported
    part = path.part
    pack = plan_packing(part)
    mut_start = part.n_user + len(part.saved) - len(part.saved_from_input)
    mutated = [(pos, mut_start + k) for k, (pos, _) in enumerate(part.mutations)]
    try:
        fwd = JaxProgram(part.forward, name, writable=part.n_user, data_parallel=data_parallel,
                         pack_out=pack, mutated=mutated)
        bwd = (JaxProgram(part.backward, name + "_backward", pack_in=pack,
                          follow_inputs=data_parallel)
               if part.backward is not None else None)
    except Unsupported as e:
        _fallback_warning(name, e.prim.name, str(e))
        path.backend_note = f"numpy (fallback: {e})"
        return False
    path.forward_program, path.backward_program = fwd, bwd
    path.forward_plan = path.backward_plan = None
    path.backend_note = "jax"
    if pack is not None:                     # double backward reads them one by one
        n_ct = len(part.cotangent_outputs)
        path.host_saved = lambda arrays: pack.host_saved(n_ct, arrays)
    return True


def _fallback_warning(name, prim, why):
    warnings.warn(f"tracegrad.compile(backend='jax'): '{name}' has a path using primitive "
                  f"'{prim}', which the JAX backend cannot lower ({why}); that path runs on the "
                  "numpy backend.", UserWarning, stacklevel=5)


def report_lines(path):
    """Lines `explain()` adds for a path built by this backend: XLA compile times and the
    lowered programs (jaxpr text)."""
    note = getattr(path, "backend_note", None)
    if note is None:
        return []
    lines = [f"backend: {note}"]
    for title, prog in (("forward", path.forward_program), ("backward", path.backward_program)):
        if prog is None or not hasattr(prog, "jaxpr"):
            continue
        lines.append(f"{title} lowered to XLA: trace {prog.trace_seconds * 1e3:.1f} ms, "
                     f"XLA compile {prog.compile_seconds * 1e3:.1f} ms; jaxpr:")
        lines += ["  " + s for s in prog.code.splitlines()]
    spec = getattr(path, "speculation", None)     # Note [Speculative backward]
    if spec is not None:
        prog = spec.program
        lines.append("speculative forward+backward program: " + (
            f"traced and compiled in {prog.compile_seconds * 1e3:.1f} ms, "
            f"{'speculating' if spec.on else 'not speculating'}" if prog is not None else
            "not built (it failed)" if spec.failed else
            "built after a call followed by backward() with the default gradient"))
    return lines
