"""One generated function per entry for a cache hit: the entry's key check and its only
path's runner, fused (Note [Fused entry]).

Note [Fused entry]
A call the last entry's key check accepts, on an entry with one path drawing no random
numbers (Note [One path, no draws] in function.py), used to run the key check
(`check(args)`, keys.py), then `path.call(tensors)` (the runner, Note [Runner]), then
unpack `(outs, why)` and pick the result: three frames, two tuple packings and the
arguments unpacked twice. `fuse(entry)` generates `fast(args)` doing the same checks in
the same order in one frame: the key check's lines, the runner's lines, the result. A
failed key check returns KEY_MISS and a failed runner check RUN_MISS, both before
anything changed, and the caller continues exactly where the separate calls would have
sent it (the keyed lookup; for RUN_MISS after noting the key as the last one, as a
passed key check does). Errors inside the program propagate as from `path.call`
(GuardFailed with the path's changes put back, RerunEagerly). Built when the entry's key
check is built, from `path.call` as it is then (a generated runner; anything else keeps
the separate calls), and dropped whenever the entry's only path changes.
"""
from ..tracing.forward_memo import MEMO, next_attempt
from .keys import key_source
from .runner import runner_source

KEY_MISS = object()     # the key check failed: the call is keyed and looked up
RUN_MISS = object()     # the key held, the path's checks did not


def fuse(entry, args):
    """`fast(args) -> result | KEY_MISS | RUN_MISS` for `entry` (whose key check was just
    built from `args`), or None when the separate calls must serve."""
    path = entry.solo
    if path is None or not entry.all_tensors or path.n_args != len(args) \
            or getattr(path.call, "path", None) is not path:
        return None
    key = key_source(entry.key, args, miss="return _KM")
    if key is None:
        return None
    owner_ids = path.n_args > 1          # the key check bound qa0, qa1, ... (keys.py)
    run = runner_source(path, miss="return _RM", unpack=False, owner_ids=owner_ids,
                        ret="return outs[0]" if path.single
                        else "return _rebuild(outs)")
    if run is None:
        return None
    (key_lines, key_env), (run_lines, env) = key, run
    clash = set(key_env) & set(env)
    if any(key_env[k] is not env[k] for k in clash):
        return None                      # (never: the two use distinct global names)
    env.update(key_env)
    env.update({"_KM": KEY_MISS, "_RM": RUN_MISS, "_next": next_attempt, "_memo": MEMO.get,
                "_rebuild": path.rebuild_outputs})
    code = "\n".join(["def fast(args):"] + key_lines + [
        "    if _memo() is not None: _next()"] + run_lines) + "\n"   # (next_attempt, inlined)
    exec(compile(code, f"<tracegrad entry {path.name}>", "exec"), env)
    fast = env["fast"]
    fast.code, fast.path = code, path
    return fast
