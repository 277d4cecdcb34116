"""`parameters_to_vector` / `vector_to_parameters`: all parameters as one flat vector."""
from ... import ops as O
from ..._errors import TracegradTypeError
from ..._tensor import Tensor


def parameters_to_vector(parameters):
    """One 1-D tensor holding every parameter, flattened, in order (differentiable)."""
    return O.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of the 1-D `vec` into `parameters` (replacing `.data`)."""
    if not isinstance(vec, Tensor):
        raise TracegradTypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    pointer = 0
    for param in parameters:
        n = param.numel()
        param.data = vec[pointer:pointer + n].view_as(param).data
        pointer += n
