"""`nn.LazyLinear` (with `nn.parameter.UninitializedParameter`): a Linear whose `in_features`
is read from the first input, as PyTorch's lazy modules do.

What users see, as in PyTorch: before the first call the parameters are
`UninitializedParameter`s (printed `<UninitializedParameter>`, `in_features=0`, their shape
unreadable); the first forward materializes them in place -- the same Parameter objects, so
references taken earlier stay valid -- initializes them as Linear does, and the module
becomes a plain `Linear`. Loading a state_dict into an uninitialized module materializes
from the checkpoint's shapes. Build optimizers after a dry run, as PyTorch advises.

Note [Lazy modules and compile]: a compiled call reads parameters as inputs fixed before
tracing starts, so materializing inside a trace cannot be recorded faithfully; it raises,
asking for one eager dry run first.
"""
from .. import _effects, _mode
from .._errors import TracegradRuntimeError
from .layers import Linear
from .module import Module
from .parameter import UninitializedParameter


def _uninitialized(module):
    return [(k, p) for k, p in module._parameters.items()
            if isinstance(p, UninitializedParameter)]


class LazyLinear(Linear):
    """`LazyLinear(out_features, bias=True)`: a Linear whose in_features is the last dim of
    the first input.

    >>> m = LazyLinear(3)
    >>> m(tracegrad.ones(2, 5)).shape, m
    (torch.Size([2, 3]), Linear(in_features=5, out_features=3, bias=True))
    """

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        Module.__init__(self)
        self.in_features, self.out_features = 0, out_features
        self.weight = UninitializedParameter(dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)
        else:
            self.register_parameter("bias", None)

    def has_uninitialized_params(self):
        return bool(_uninitialized(self))

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            Linear.reset_parameters(self)

    def initialize_parameters(self, input):
        """Materialize weight (out, input.shape[-1]) and bias, then Linear's init."""
        if self.has_uninitialized_params():
            with _mode.no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()

    def forward(self, input):
        if self.has_uninitialized_params() and _effects.active() is not None:
            raise TracegradRuntimeError(          # Note [Lazy modules and compile]
                f"{type(self).__name__}: its parameters are created by the first call, which "
                "cannot happen inside tracegrad.compile. Call the model once eagerly (a dry "
                "run with an example batch) before compiling it.")
        self.initialize_parameters(input)
        self.__class__ = self.cls_to_become
        return Linear.forward(self, input)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        for name, p in _uninitialized(self):
            key = prefix + name
            if key in state_dict and hasattr(state_dict[key], "shape"):
                with _mode.no_grad():
                    p.materialize(tuple(state_dict[key].shape))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)
