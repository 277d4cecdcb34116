"""Generate docs/api.md from the code, so the API reference cannot drift from it.

    python tools/gen_api_docs.py            # rewrite docs/api.md
    python tools/gen_api_docs.py --check    # exit 1 if docs/api.md is stale (the test does this)

For each public module (those of MODULES that exist: a lazy submodule not written yet is
skipped) it lists every public name with its signature and the first line of its docstring,
then the methods of the main classes (CLASSES). Last comes the section "PyTorch names not
(yet) supported": each name of docs/torch_names.txt (`torch.X`) whose `tracegrad.X` does not
resolve. The output depends only on the code: object addresses are removed from default
values, and names are sorted.
"""
import argparse
import importlib
import inspect
import os
import re
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
API_MD = os.path.join(ROOT, "docs", "api.md")
TORCH_NAMES = os.path.join(ROOT, "docs", "torch_names.txt")
COMMAND = "python tools/gen_api_docs.py"

MODULES = [   # one per line: branches adding modules then merge cleanly
    "tracegrad",
    "tracegrad.nn",
    "tracegrad.nn.functional",
    "tracegrad.nn.init",
    "tracegrad.nn.utils",
    "tracegrad.nn.utils.rnn",
    "tracegrad.nn.utils.parametrize",
    "tracegrad.nn.utils.parametrizations",
    "tracegrad.optim",
    "tracegrad.optim.lr_scheduler",
    "tracegrad.optim.swa_utils",
    "tracegrad.autograd",
    "tracegrad.autograd.functional",
    "tracegrad.func",
    "tracegrad.viz",
    "tracegrad.utils.data",
    "tracegrad.random",
    "tracegrad.amp",
    "tracegrad.utils.checkpoint",
    "tracegrad.linalg",
    "tracegrad.distributions",
    "tracegrad.compiler",
    "tracegrad.special",
]
CLASSES = ["tracegrad.Tensor", "tracegrad.nn.Module", "tracegrad.optim.Optimizer"]
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def import_optional(name):
    """The module `name`, or None when it (or a tracegrad package above it) does not exist.

    Other import errors propagate: a module that exists but is broken must fail loudly."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        missing = e.name or ""
        if missing == name or (missing.startswith("tracegrad") and name.startswith(missing)):
            return None
        raise


def resolve(dotted):
    """The object at `dotted` (e.g. "tracegrad.nn.functional.relu"), or None."""
    parts = dotted.split(".")
    obj = import_optional(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        if obj is None:
            return None
        try:
            obj = getattr(obj, part)
            continue
        except AttributeError:
            pass
        except ModuleNotFoundError as e:       # a lazy submodule that does not exist yet
            if not (e.name or "").startswith("tracegrad"):
                raise
            return None
        if not isinstance(obj, types.ModuleType):
            return None
        obj = import_optional(".".join(parts[:i + 1]))
    return obj


def public_names(module):
    """Public names of `module`: its `__all__`, else what it defines or re-exports from its
    own package (never submodules, ALL_CAPS constants, nor names imported from elsewhere,
    e.g. an error class that `nn.init` uses); tracegrad's top level re-exports all of it."""
    if hasattr(module, "__all__"):
        return sorted(set(module.__all__))
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, types.ModuleType) or (
                name.isupper() and not inspect.isclass(value)):     # (SGD, LBFGS are classes)
            continue
        origin = getattr(value, "__module__", None)
        if isinstance(origin, str) and not (
                origin == module.__name__ or origin.startswith(module.__name__ + ".")):
            continue
        names.append(name)
    return sorted(names)


def signature(obj):
    try:
        text = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"
    return ADDRESS.sub("", text)


def first_doc_line(obj):
    """The first non-empty line of `obj`'s own docstring (a class does not inherit one)."""
    if inspect.isclass(obj):
        doc = inspect.cleandoc(obj.__dict__.get("__doc__") or "")
    elif isinstance(obj, (int, float, str, bool, type(None))):
        doc = None
    else:
        doc = inspect.getdoc(obj)
    for line in (doc or "").splitlines():
        if line.strip():
            return ADDRESS.sub("", line.strip())
    return ""


def describe(name, obj):
    """One Markdown list item: `name(signature)` (or `name: kind`) — first docstring line."""
    if isinstance(obj, property) or inspect.isdatadescriptor(obj):
        head, doc = f"`{name}` (attribute)", first_doc_line(obj)
    elif inspect.isclass(obj):
        head, doc = f"`{name}{signature(obj)}` (class)", first_doc_line(obj)
    elif callable(obj):
        head, doc = f"`{name}{signature(obj)}`", first_doc_line(obj)
    else:
        text = ADDRESS.sub("", repr(obj))
        head = f"`{name} = {text}`" if len(text) <= 40 else f"`{name}` ({type(obj).__name__})"
        doc = ""
    return f"- {head}" + (f" — {doc}" if doc else "")


def module_section(module):
    lines = [f"## `{module.__name__}`", ""]
    summary = first_doc_line(module)
    if summary:
        lines += [summary, ""]
    for name in public_names(module):
        if not hasattr(module, name):
            continue
        lines.append(describe(name, getattr(module, name)))
    return lines + [""]


def class_members(cls):
    """Public attributes and methods defined by `cls` or its tracegrad bases."""
    seen = {}
    for klass in reversed(cls.__mro__):
        if not klass.__module__.startswith("tracegrad"):
            continue
        for name, value in vars(klass).items():
            if not name.startswith("_"):
                seen[name] = value
    return sorted(seen.items())


def class_section(dotted, cls):
    lines = [f"## `{dotted}` members", ""]
    for name, value in class_members(cls):
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        lines.append(describe(name, value))
    return lines + [""]


def torch_names(path=TORCH_NAMES):
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def unsupported_section(names):
    missing = [n for n in names if resolve("tracegrad" + n[len("torch"):]) is None]
    lines = ["## PyTorch names not (yet) supported", "",
             f"Of the {len(names)} commonly used PyTorch names in `docs/torch_names.txt`, "
             f"{len(names) - len(missing)} resolve in tracegrad (`torch.X` -> `tracegrad.X`); "
             f"these {len(missing)} do not:", ""]
    groups = {}
    for name in missing:
        groups.setdefault(name.rsplit(".", 1)[0], []).append(name.rsplit(".", 1)[1])
    for prefix in sorted(groups):
        lines.append(f"- `{prefix}`: " + ", ".join(f"`{n}`" for n in sorted(groups[prefix])))
    return lines + [""]


def generate():
    lines = ["# tracegrad API reference", "",
             f"Generated from the code by `{COMMAND}`; do not edit by hand "
             "(a test fails when this file is stale). Each entry: the signature and the "
             "first line of the docstring.", ""]
    for module in [import_optional(name) for name in MODULES]:
        if module is not None:
            lines += module_section(module)
    for dotted in CLASSES:
        cls = resolve(dotted)
        if inspect.isclass(cls):
            lines += class_section(dotted, cls)
    lines += unsupported_section(torch_names())
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if docs/api.md differs from the code")
    args = parser.parse_args(argv)
    sys.path.insert(0, ROOT)                   # the checkout's tracegrad, installed or not
    text = generate()
    if args.check:
        try:
            with open(API_MD, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != text:
            print(f"docs/api.md is stale: regenerate it with `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    with open(API_MD, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(API_MD, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
