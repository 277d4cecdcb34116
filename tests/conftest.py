"""Shared pytest setup: the tests folder is importable (for `op_table`), every compiled path
has its graphs verified after each pipeline stage (TRACEGRAD_VERIFY), every test ends with
the default dtype it started with (tracegrad's and, if loaded, torch's), and the `lib`
fixture runs a test once on tracegrad and once on PyTorch (skipped without torch)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("TRACEGRAD_VERIFY", "1")


@pytest.fixture(autouse=True)
def _restore_default_dtype():
    import tracegrad
    before = tracegrad.get_default_dtype()
    torch = sys.modules.get("torch")
    torch_before = torch.get_default_dtype() if torch is not None else None
    yield
    tracegrad.set_default_dtype(before)
    if torch is not None:
        torch.set_default_dtype(torch_before)


@pytest.fixture(params=["tracegrad", "torch"])
def lib(request):
    """The library under test: `tracegrad`, then `torch` (the oracle) when installed."""
    if request.param == "torch":
        return pytest.importorskip("torch")
    import tracegrad
    return tracegrad
