"""`python -m tracegrad`: command-line tools.

`python -m tracegrad explain SCRIPT.py [--out DIR] [--full] [args...]` runs SCRIPT as
`__main__` (with `sys.argv = [SCRIPT, *args]`) with the debug dump on (to DIR, or to a fresh
temporary directory it prints), then prints a summary of every function compiled during the
run: its paths, each path's guards (kind, site, expected outcome), forward/backward node
counts, saved bytes, and why each re-trace happened. Re-traces are also logged to stderr as
they happen. `--full` prints each function's whole `explain()` report instead.
"""
import argparse
import logging
import os
import runpy
import sys
import tempfile
import traceback

USAGE = "python -m tracegrad explain SCRIPT.py [--out DIR] [--full] [args...]"


def _parser():
    p = argparse.ArgumentParser(
        prog="python -m tracegrad",
        description="tracegrad tools: see why compiled functions traced and re-traced.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    e = sub.add_parser(
        "explain", usage=USAGE,
        help="run a script with the debug dump on and summarize every compiled function",
        description="Run SCRIPT.py as __main__ with TRACEGRAD_DUMP_DIR set, then print, per "
                    "compiled function: its paths, guards, node counts, saved bytes and "
                    "re-trace reasons. Arguments after SCRIPT.py are passed to the script "
                    "(put --out/--full before SCRIPT.py, or right after it).")
    e.add_argument("--out", metavar="DIR", help="dump directory (default: a new temp dir)")
    e.add_argument("--full", action="store_true", help="print the full explain() reports")
    e.add_argument("script", metavar="SCRIPT.py", help="the Python script to run")
    e.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    return p


def _own_options(ns):
    """Take `--out DIR` / `--full` given right after SCRIPT.py out of the script's args."""
    args = list(ns.args)
    while args:
        if args[0] == "--":
            args.pop(0)
            break
        if args[0] == "--full":
            ns.full = True
            args.pop(0)
        elif args[0] == "--out" and len(args) > 1:
            ns.out = args[1]
            del args[:2]
        elif args[0].startswith("--out="):
            ns.out = args.pop(0).split("=", 1)[1]
        else:
            break
    ns.args = args
    return ns


def main(argv=None):
    p = _parser()
    ns = p.parse_args(argv)
    if ns.command is None:
        p.print_help()
        return 2
    return explain_command(_own_options(ns))


def explain_command(ns):
    from .compiler import function as F
    from .compiler.explain import explain, summary
    out = os.path.abspath(ns.out or tempfile.mkdtemp(prefix="tracegrad-dump-"))
    os.makedirs(out, exist_ok=True)
    created = []
    F._listeners.append(created.append)      # keep every compiled function alive
    handler, level = _log_to_stderr()
    old = (os.environ.get("TRACEGRAD_DUMP_DIR"), list(sys.argv), list(sys.path))
    os.environ["TRACEGRAD_DUMP_DIR"] = out
    script = os.path.abspath(ns.script)
    sys.argv = [ns.script, *ns.args]
    sys.path.insert(0, os.path.dirname(script))
    status = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception:
        traceback.print_exc()
        status = 1
    finally:
        F._listeners.remove(created.append)
        logging.getLogger("tracegrad").removeHandler(handler)
        logging.getLogger("tracegrad").setLevel(level)
        _restore(*old)
    sys.stdout.flush()
    print(f"\n=== tracegrad explain: {len(created)} compiled function(s) in {ns.script} ===")
    for cf in created:
        print()
        print(explain(cf) if ns.full else summary(cf))
    print(f"\ndebug dump: {out}  (open {os.path.join(out, 'index.html')})")
    return status


def _log_to_stderr():
    """Show re-traces (INFO on the `tracegrad` logger) while the script runs."""
    logger = logging.getLogger("tracegrad")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.setLevel(logging.INFO)
    logger.addHandler(handler)
    level = logger.level
    if level == logging.NOTSET or level > logging.INFO:
        logger.setLevel(logging.INFO)
    return handler, level


def _restore(dump_dir, argv, path):
    if dump_dir is None:
        os.environ.pop("TRACEGRAD_DUMP_DIR", None)
    else:
        os.environ["TRACEGRAD_DUMP_DIR"] = dump_dir
    sys.argv[:] = argv
    sys.path[:] = path
