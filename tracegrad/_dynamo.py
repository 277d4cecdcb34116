"""`tracegrad._dynamo`: the few names of `torch._dynamo` that tutorials and benchmark scripts
call, so they run unchanged with `import tracegrad as torch`: `reset()`, `disable`,
`is_compiling()` (tracegrad.compiler's, user_api.py), `config.recompile_limit` (alias
`cache_size_limit`: the number of paths a compiled function keeps before it runs eagerly,
the default of `compile(cache_limit=...)` read when a function is compiled) and
`OptimizedModule` (what `compile(module)` returns) and `exc.Unsupported` (what a
`compile(fn, fullgraph=True)` call raises where it would run eagerly). Nothing else of
dynamo exists here.
"""
import types

from .compiler.fullgraph import Unsupported
from .compiler.module import CompiledModule as OptimizedModule  # noqa: F401
from .compiler.user_api import disable, is_compiling, reset  # noqa: F401


class _Config:
    """`torch._dynamo.config`'s settings that mean something here."""

    def __init__(self):
        self.recompile_limit = 8

    @property
    def cache_size_limit(self):          # the name before PyTorch 2.6, still accepted there
        return self.recompile_limit

    @cache_size_limit.setter
    def cache_size_limit(self, n):
        self.recompile_limit = n


config = _Config()


exc = types.SimpleNamespace(Unsupported=Unsupported)     # `torch._dynamo.exc`
