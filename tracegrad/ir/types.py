"""Value types of the IR: `TensorType(shape, dtype)`, printed like `f32[4,3]`, and the SSA
`Value` that carries one."""
from dataclasses import dataclass

from .. import _dtype as D

_SHORT = D._SHORT_NAMES


@dataclass(frozen=True)
class TensorType:
    """Static shape and dtype of an IR value."""

    shape: tuple
    dtype: D.dtype

    def __str__(self):
        return f"{_SHORT[self.dtype.name]}[{','.join(str(s) for s in self.shape)}]"

    @property
    def nbytes(self):
        n = self.dtype.itemsize
        for s in self.shape:
            n *= s
        return n

    @staticmethod
    def of(array):
        return TensorType(tuple(array.shape), D._FROM_NP[array.dtype])


class Value:
    """An SSA value: `%name: type`."""

    __slots__ = ("id", "type", "name", "role")

    def __init__(self, id, type, name=None, role=None):
        self.id = id
        self.type = type
        self.name = name            # printed name; defaults to the id
        self.role = role            # for inputs: "arg", "captured", "saved", "cotangent"

    def __repr__(self):
        return f"%{self.name if self.name is not None else self.id}"

    @property
    def shape(self):
        return self.type.shape

    @property
    def dtype(self):
        return self.type.dtype
