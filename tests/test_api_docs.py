"""docs/api.md is generated from the code (tools/gen_api_docs.py) and must be up to date."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "gen_api_docs.py"


def _tool():
    spec = importlib.util.spec_from_file_location("gen_api_docs", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_md_is_up_to_date():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, (
        "docs/api.md is stale (the public API or docs/torch_names.txt changed): "
        "regenerate it with `python tools/gen_api_docs.py` and commit it.\n" + proc.stderr)


def test_missing_modules_and_names_resolve_to_none():
    gen = _tool()
    assert gen.import_optional("tracegrad.no_such_module") is None
    assert gen.import_optional("tracegrad.no_such_package.data") is None
    assert gen.resolve("tracegrad.no_such_module.thing") is None
    assert gen.resolve("tracegrad.Tensor.no_such_method") is None
    import tracegrad
    assert gen.resolve("tracegrad.nn.functional.relu") is tracegrad.nn.functional.relu
    assert gen.resolve("tracegrad.Tensor.view") is tracegrad.Tensor.view


def test_unsupported_section_lists_only_what_tracegrad_lacks():
    gen = _tool()
    text = "\n".join(gen.unsupported_section(["torch.zeros", "torch.no_such_op_xyz",
                                              "torch.nn.NoSuchLayerXyz", "torch.nn.Linear"]))
    assert "`no_such_op_xyz`" in text and "`NoSuchLayerXyz`" in text
    assert "`zeros`" not in text and "`Linear`" not in text
    assert "Of the 4 commonly used PyTorch names" in text


def test_torch_names_list_is_well_formed():
    names = _tool().torch_names()
    assert len(names) >= 200
    assert len(names) == len(set(names)), "duplicates in docs/torch_names.txt"
    assert all(n.startswith("torch.") and " " not in n for n in names)
