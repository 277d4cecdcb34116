"""`tracegrad.nn.modules`: PyTorch's package path to the module classes, kept for code that
spells it out (`nn.modules.module.register_module_forward_hook`, Note [Global module
hooks]); `modules.module` is `tracegrad.nn.module`."""
import sys

from .. import module  # noqa: F401

sys.modules[__name__ + ".module"] = module
