"""The debug dump: with `TRACEGRAD_DUMP_DIR=dir`, every compiled path is written to disk.

Layout (per compiled function `<fn>`, per path `k` in creation order):
```
dir/index.html                        links to everything (rewritten after every dump)
dir/<fn>/explain.txt                  the function's explain() report (rewritten per path)
dir/<fn>/path<k>/00_raw.txt           the raw traced IR
                 01_functionalize.txt the IR after each pass, headed by its statistics
                 ...                  (one file per pass: pipeline passes, vjp)
                 NN_forward.txt       the final forward / backward programs' IR (after
                 NN_backward.txt      partition and memory scheduling)
                 forward.py           generated code of both programs
                 backward.py
                 guards.txt           why the path was traced, and its guards with sources
                 graph.svg            tracegrad.viz's picture (needs Graphviz `dot`)
```
A dump never breaks compilation: any error is logged on the `tracegrad` logger. A function
directory is cleared the first time this process writes it, so a re-run never mixes paths
of two runs; two compiled functions with one name get `<fn>`, `<fn>_2`, ...
"""
import html
import logging
import os
import re
import shutil
import threading
import weakref

from .explain import explain, guard_lines, summary

log = logging.getLogger("tracegrad")

SVG_MAX_NODES = 3000          # larger graphs take dot too long; the note says so
_lock = threading.Lock()
_dirs = weakref.WeakKeyDictionary()    # CompiledFunction -> (root, directory name)
_taken = {}                            # root -> directory names claimed by this process


def dump_path(cf, path, root=None):
    """Write `path` of compiled function `cf` under `root` (default: $TRACEGRAD_DUMP_DIR)."""
    root = root or os.environ.get("TRACEGRAD_DUMP_DIR")
    if not root:
        return None
    try:
        with _lock:
            d = _write_path(root, cf, path)
            write_index(root)
        return d
    except Exception as e:      # the dump is a debugging aid: never fail the user's call
        log.warning("tracegrad: debug dump of '%s' to %s failed: %s", cf.name, root, e,
                    exc_info=True)
        return None


def _fn_dir(root, cf):
    got = _dirs.get(cf)
    if got is not None and got[0] == root:
        return os.path.join(root, got[1])
    base = re.sub(r"[^A-Za-z0-9_.-]", "_", cf.name) or "fn"
    taken = _taken.setdefault(root, set())
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    _dirs[cf] = (root, name)
    d = os.path.join(root, name)
    if os.path.isdir(d):
        shutil.rmtree(d)             # left over from an earlier run
    os.makedirs(d)
    return d


def _write_path(root, cf, path):
    fdir = _fn_dir(root, cf)
    k = cf.programs.index(path)
    d = os.path.join(fdir, f"path{k}")
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    files = _ir_files(path)
    for name, text in files:
        _write(d, name, text)
    _write(d, "forward.py", path.forward_program.code)
    if path.backward_program is not None:
        _write(d, "backward.py", path.backward_program.code)
    _write(d, "guards.txt", _guards_text(path))
    note = _render_svg(path, os.path.join(d, "graph.svg"))
    if note:
        _write(d, "graph_note.txt", note + "\n")
    _write(fdir, "explain.txt", str(explain(cf)))
    _write(fdir, "summary.txt", str(summary(cf)))
    return d


def _ir_files(path):
    """[(file name, text)]: the raw IR, the IR after each kept pass, the final programs."""
    stages = [("raw", path.raw, None)]
    stats_of = list(path.log)
    for name, g in path.stages:
        while stats_of and stats_of[0][0] != name:
            stats_of.pop(0)
        stages.append((name, g, stats_of.pop(0)[1] if stats_of else None))
    out = []
    for i, (name, g, stats) in enumerate(stages):
        head = ("# the raw traced IR (before any pass)" if name == "raw" else
                f"# IR after pass '{name}'" + (f": {_fmt(stats)}" if stats else ""))
        out.append((f"{i:02d}_{name}.txt", f"{head}\n# {len(g.nodes)} nodes\n{g}\n"))
    n = len(stages)
    after = [name for name, _ in path.log]
    after = after[after.index("vjp") + 1:] if "vjp" in after else after
    for j, (which, g) in enumerate((("forward", path.part.forward),
                                    ("backward", path.part.backward))):
        if g is None:
            continue
        head = f"# final {which} program IR; stages after the vjp: {', '.join(after)}"
        out.append((f"{n + j:02d}_{which}.txt", f"{head}\n# {len(g.nodes)} nodes\n{g}\n"))
    return out


def _fmt(stats):
    return ", ".join(f"{a}={b}" for a, b in stats.items())


def _guards_text(path):
    lines = [f"traced because: {getattr(path, 'trace_reason', '?')}", ""]
    g = guard_lines(path)
    lines += g if g else ["no guards (no data-dependent decision)"]
    return "\n".join(lines) + "\n"


def _render_svg(path, target):
    """Write graph.svg; return a note saying why not when it cannot be drawn."""
    if shutil.which("dot") is None:
        return "graph.svg skipped: the Graphviz `dot` program is not installed."
    n = len(path.part.forward.nodes) + (len(path.part.backward.nodes)
                                        if path.part.backward is not None else 0)
    if n > SVG_MAX_NODES:
        return f"graph.svg skipped: {n} nodes (more than {SVG_MAX_NODES})."
    try:
        from .. import viz
        dot = viz.to_dot(path)
    except Exception as e:           # tracegrad.viz missing, or cannot draw this object
        return f"graph.svg skipped: tracegrad.viz could not draw the path ({e!r})."
    with open(target, "wb") as fh:
        fh.write(dot.pipe(format="svg"))
    return None


def _write(d, name, text):
    with open(os.path.join(d, name), "w", encoding="utf-8") as fh:
        fh.write(text)


def _path_key(name):
    m = re.fullmatch(r"path(\d+)", name)
    return int(m.group(1)) if m else -1


def write_index(root):
    """(Re)write root/index.html linking every function, path and file under `root`."""
    body = [f"<h1>tracegrad debug dump</h1><p>{html.escape(os.path.abspath(root))}</p>"]
    for fn in sorted(os.listdir(root)):
        fdir = os.path.join(root, fn)
        if not os.path.isdir(fdir):
            continue
        body.append(f"<h2>{html.escape(fn)}</h2><ul>")
        for top in sorted(f for f in os.listdir(fdir) if os.path.isfile(os.path.join(fdir, f))):
            body.append(f'<li><a href="{_href(fn, top)}">{html.escape(top)}</a></li>')
        body.append("</ul>")
        paths = sorted((p for p in os.listdir(fdir) if _path_key(p) >= 0), key=_path_key)
        for p in paths:
            pdir = os.path.join(fdir, p)
            reason = _first_line(os.path.join(pdir, "guards.txt"))
            body.append(f"<h3>{html.escape(fn)} / {p}</h3><p>{html.escape(reason)}</p><ul>")
            for f in sorted(os.listdir(pdir)):
                body.append(f'<li><a href="{_href(fn, p, f)}">{html.escape(f)}</a></li>')
            body.append("</ul>")
            note = _first_line(os.path.join(pdir, "graph_note.txt"))
            if note:
                body.append(f"<p><em>{html.escape(note)}</em></p>")
    page = ("<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>tracegrad dump</title>"
            "</head><body>\n" + "\n".join(body) + "\n</body></html>\n")
    tmp = os.path.join(root, f".index.html.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(page)
    os.replace(tmp, os.path.join(root, "index.html"))


def _href(*parts):
    from urllib.parse import quote
    return "/".join(quote(p) for p in parts)


def _first_line(fname):
    try:
        with open(fname, encoding="utf-8") as fh:
            return fh.readline().strip()
    except OSError:
        return ""
