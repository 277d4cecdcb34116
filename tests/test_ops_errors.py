"""Bad input raises the exception type PyTorch raises (checked against torch when installed),
with a message that says what is wrong and where (the user's file:line), and leaves the
library usable: the next call works and a failed in-place op changed nothing."""
import pytest

import tracegrad as tg

THIS_FILE = "test_ops_errors.py"


def _leaf(m, s):
    s["x"] = m.ones(3, requires_grad=True)
    return s["x"]


def _ints(m, s):
    s["x"] = m.tensor([1, 2, 3])
    return s["x"]


def _expanded(m, s):
    s["x"] = m.zeros(1)
    return s["x"].expand(3)


def _zeros(m, s):
    s["x"] = m.zeros(3)
    return s["x"]


def _unchanged(values):
    def post(m, s):
        assert s["x"].tolist() == values and s["x"]._version == 0
    return post


# (id, bad call on library m with a scratch dict s, builtin type, words the message must hold,
#  optional check after the failure)
CASES = [
    ("add_shape_mismatch", lambda m, s: m.ones(2, 3) + m.ones(4, 3), RuntimeError, ["2", "4"]),
    ("matmul_shape_mismatch", lambda m, s: m.ones(2, 3) @ m.ones(4, 5), RuntimeError,
     ["2x3", "4x5"]),
    ("matmul_zero_dim", lambda m, s: m.tensor(1.0) @ m.ones(3), RuntimeError, ["1d"]),
    ("matmul_dtype_mismatch", lambda m, s: m.ones(2, 3) @ m.ones(3, 2, dtype=m.float64),
     RuntimeError, ["dtype"]),
    ("mm_shape_mismatch", lambda m, s: m.mm(m.ones(2, 3), m.ones(2, 3)), RuntimeError,
     ["2x3"]),
    ("mm_not_matrix", lambda m, s: m.mm(m.ones(3), m.ones(3, 2)), RuntimeError, ["matrix"]),
    ("bmm_not_3d", lambda m, s: m.bmm(m.ones(2, 3), m.ones(3, 2)), RuntimeError, ["3d"]),
    ("dot_size_mismatch", lambda m, s: m.dot(m.ones(3), m.ones(4)), RuntimeError, ["3", "4"]),
    ("cat_shape_mismatch", lambda m, s: m.cat([m.ones(2, 3), m.ones(2, 4)]), RuntimeError,
     ["size", "3", "4"]),
    ("stack_shape_mismatch", lambda m, s: m.stack([m.ones(2, 3), m.ones(3, 2)]), RuntimeError,
     ["equal size"]),
    ("view_wrong_numel", lambda m, s: m.ones(2, 3).view(4), RuntimeError, ["[4]", "6"]),
    ("view_non_contiguous", lambda m, s: m.ones(2, 3).t().view(6), RuntimeError,
     ["reshape"]),
    ("view_two_inferred", lambda m, s: m.ones(6).view(-1, -1), RuntimeError, ["one dimension"]),
    ("reshape_wrong_numel", lambda m, s: m.ones(2, 3).reshape(4, 2), RuntimeError, ["6"]),
    ("expand_bad_size", lambda m, s: m.ones(2, 3).expand(4, 3), RuntimeError, ["4", "2"]),
    ("in_place_grows", lambda m, s: m.ones(3).add_(m.ones(2, 3)), RuntimeError,
     ["[3]", "[2, 3]"]),
    ("setitem_shape_mismatch", lambda m, s: m.ones(2, 3).__setitem__(0, m.ones(4)),
     RuntimeError, ["3", "4"]),
    ("index_out_of_range", lambda m, s: m.ones(3)[5], IndexError, ["5", "size 3"]),
    ("index_tensor_out_of_range", lambda m, s: m.ones(3)[m.tensor([0, 5])], IndexError,
     ["5", "size 3"]),
    ("too_many_indices", lambda m, s: m.ones(3)[0, 1], IndexError, ["too many"]),
    ("mask_shape_mismatch", lambda m, s: m.ones(2, 3)[m.tensor([True, False, True])],
     IndexError, ["3", "2"]),
    ("float_tensor_index", lambda m, s: m.ones(3)[m.tensor([0.0, 1.0])], IndexError,
     ["long", "bool"]),
    ("float_scalar_index", lambda m, s: m.ones(3)[1.0], IndexError, ["integers"]),
    ("sum_dim_out_of_range", lambda m, s: m.ones(2, 3).sum(dim=2), IndexError,
     ["dimension out of range", "2"]),
    ("softmax_dim_out_of_range", lambda m, s: m.ones(2, 3).softmax(-3), IndexError,
     ["dimension out of range"]),
    ("transpose_dim_out_of_range", lambda m, s: m.ones(2, 3).transpose(0, 3), IndexError,
     ["dimension out of range"]),
    ("unsqueeze_dim_out_of_range", lambda m, s: m.ones(2).unsqueeze(3), IndexError,
     ["dimension out of range"]),
    ("max_dim_out_of_range", lambda m, s: m.ones(2).max(dim=1), IndexError,
     ["dimension out of range"]),
    ("cat_dim_out_of_range", lambda m, s: m.cat([m.ones(2), m.ones(2)], dim=1), IndexError,
     ["dimension out of range"]),
    ("permute_wrong_count", lambda m, s: m.ones(2, 3).permute(0), RuntimeError, ["dim"]),
    ("t_of_3d", lambda m, s: m.ones(2, 3, 4).t(), RuntimeError, ["2 dimensions"]),
    ("split_bad_sizes", lambda m, s: m.ones(5).split([2, 2]), RuntimeError, ["sum", "5"]),
    ("item_of_many", lambda m, s: m.ones(3).item(), RuntimeError, ["3 elements"]),
    ("bool_of_many", lambda m, s: bool(m.ones(3)), RuntimeError, ["ambiguous"]),
    ("float_of_many", lambda m, s: float(m.ones(2)), ValueError, ["one element"]),
    ("inplace_on_leaf", lambda m, s: _leaf(m, s).add_(1), RuntimeError,
     ["leaf", "in-place"], _unchanged([1.0, 1.0, 1.0])),
    ("iadd_on_leaf", lambda m, s: _leaf(m, s).__iadd__(1), RuntimeError, ["leaf"],
     _unchanged([1.0, 1.0, 1.0])),
    ("setitem_on_leaf", lambda m, s: _leaf(m, s).__setitem__(0, 2.0), RuntimeError, ["leaf"],
     _unchanged([1.0, 1.0, 1.0])),
    ("mean_of_int", lambda m, s: m.tensor([1, 2]).mean(), RuntimeError, ["mean", "long"]),
    ("var_of_int", lambda m, s: m.tensor([1, 2]).var(), RuntimeError, ["floating point"]),
    ("softmax_of_int", lambda m, s: m.tensor([1, 2]).softmax(0), NotImplementedError,
     ["long"]),
    ("requires_grad_int", lambda m, s: m.tensor([1, 2], requires_grad=True), RuntimeError,
     ["floating point"]),
    ("requires_grad_int_method", lambda m, s: _ints(m, s).requires_grad_(), RuntimeError,
     ["floating point"], lambda m, s: not s["x"].requires_grad),
    ("numpy_requires_grad", lambda m, s: m.ones(2, requires_grad=True).numpy(), RuntimeError,
     ["detach"]),
    ("int_iadd_float", lambda m, s: _ints(m, s).__iadd__(1.5), RuntimeError,
     ["float", "long"], _unchanged([1, 2, 3])),
    ("int_div_", lambda m, s: _ints(m, s).div_(2), RuntimeError, ["can't be cast"],
     _unchanged([1, 2, 3])),
    ("int_sigmoid_", lambda m, s: _ints(m, s).sigmoid_(), RuntimeError, ["can't be cast"],
     _unchanged([1, 2, 3])),
    ("bool_add_int", lambda m, s: m.tensor([True]).add_(2), RuntimeError, ["bool"]),
    ("int_floor_divide_by_zero", lambda m, s: m.tensor([1, 2]) // 0, RuntimeError,
     ["zerodivision"]),
    ("int_remainder_by_zero", lambda m, s: m.tensor([1, 2]) % m.tensor([1, 0]), RuntimeError,
     ["zerodivision"]),
    ("int_negative_power", lambda m, s: m.tensor([1, 2]) ** -1, RuntimeError, ["negative"]),
    ("neg_of_bool", lambda m, s: -m.tensor([True]), RuntimeError, ["bool", "~"]),
    ("abs_of_bool", lambda m, s: m.tensor([True]).abs(), NotImplementedError, ["bool"]),
    ("and_of_floats", lambda m, s: m.ones(3) & m.ones(3), NotImplementedError, ["float"]),
    ("invert_of_floats", lambda m, s: ~m.ones(3), TypeError, ["integer", "boolean"]),
    ("where_float_condition", lambda m, s: m.where(m.ones(3), m.ones(3), m.zeros(3)),
     RuntimeError, ["boolean", "float"]),
    ("clamp_without_bounds", lambda m, s: m.ones(3).clamp(), RuntimeError, ["min", "max"]),
    ("fill_with_vector", lambda m, s: m.ones(3).fill_(m.ones(2)), RuntimeError,
     ["0-dimension"]),
    ("max_of_empty", lambda m, s: m.ones(0).max(), RuntimeError, ["numel() == 0"]),
    ("backward_non_scalar", lambda m, s: (m.ones(3, requires_grad=True) * 2).backward(),
     RuntimeError, ["scalar outputs"]),
    ("inplace_on_expanded_view", lambda m, s: _expanded(m, s).add_(1), RuntimeError,
     ["single memory location", "clone"], _unchanged([0.0])),
    ("mul_on_broadcast_view", lambda m, s: m.broadcast_to(_zeros(m, s), (2, 3)).mul_(2),
     RuntimeError, ["single memory location", "clone"], _unchanged([0.0, 0.0, 0.0])),
    ("add_none", lambda m, s: m.ones(3) + None, TypeError, ["NoneType", "add"]),
    ("mul_str", lambda m, s: m.ones(3) * "a", TypeError, ["str", "mul"]),
    ("backward_twice", lambda m, s: _backward_twice(m), RuntimeError, ["retain_graph"]),
    ("floor_divide_backward", lambda m, s: (m.ones(3, requires_grad=True) // 2).sum().backward(),
     RuntimeError, ["not implemented"]),
    # argument checks PyTorch makes before any kernel runs
    ("split_size_zero", lambda m, s: m.ones(4).split(0), RuntimeError, ["split_size", "4"]),
    ("split_size_negative", lambda m, s: m.ones(4).split(-1), RuntimeError, ["-1"]),
    ("chunk_zero", lambda m, s: m.ones(4).chunk(0), RuntimeError, ["chunks", "0"]),
    ("cat_empty_list", lambda m, s: m.cat([]), ValueError, ["non-empty"]),
    ("argmax_empty", lambda m, s: m.ones(0).argmax(), IndexError, ["numel() == 0"]),
    ("argmin_empty_dim", lambda m, s: m.ones(0, 3).argmin(0), IndexError, ["dim 0"]),
    ("linspace_negative_steps", lambda m, s: m.linspace(0, 1, -1), RuntimeError, ["steps"]),
    ("eye_negative", lambda m, s: m.eye(-1), RuntimeError, ["-1"]),
    ("bool_minus_number", lambda m, s: m.ones(2, dtype=m.bool) - 1.0, RuntimeError,
     ["bool", "logical_not"]),
    ("number_minus_bool", lambda m, s: 1.0 - m.ones(2, dtype=m.bool), RuntimeError, ["bool"]),
    ("float_minus_python_bool", lambda m, s: m.ones(2) - True, RuntimeError, ["bool"]),
    ("bool_minus_bool", lambda m, s: m.ones(2, dtype=m.bool) - m.ones(2, dtype=m.bool),
     RuntimeError, ["two bool tensors", "logical_xor"]),
    ("bool_sub_inplace", lambda m, s: _zeros(m, s).sub_(m.ones(3, dtype=m.bool)), RuntimeError,
     ["bool"], _unchanged([0.0, 0.0, 0.0])),
    ("add_list", lambda m, s: m.ones(2) + [1, 2], TypeError, ["list", "tensor("]),
    ("mul_tuple", lambda m, s: (1, 2) * m.ones(2), TypeError, ["tuple"]),
    ("where_list", lambda m, s: m.where(m.ones(2) > 0, m.ones(2), [1.0, 2.0]), TypeError,
     ["list"]),
]


def _backward_twice(m):
    y = (m.ones(2, requires_grad=True) * m.ones(2, requires_grad=True)).sum()
    y.backward()
    y.backward()


def _cases():
    for c in CASES:
        c = c + (None,) * (5 - len(c))
        yield pytest.param(*c[1:], id=c[0])


def _raised(fn, m, s):
    try:
        fn(m, s)
    except Exception as e:    # noqa: BLE001 - the point is to look at what was raised
        return e
    raise AssertionError("no exception was raised")


def _builtin_base(cls):
    return next(c for c in cls.__mro__ if c.__module__ == "builtins")


def _library_still_works(m):
    x = m.ones(2, 3, requires_grad=True)
    (x * 2).sum().backward()
    assert x.grad.tolist() == [[2.0] * 3] * 2
    assert m.is_grad_enabled()


@pytest.mark.parametrize("bad,builtin,words,post", _cases())
def test_error_type_message_and_recovery(bad, builtin, words, post):
    s = {}
    err = _raised(bad, tg, s)
    assert isinstance(err, builtin), f"{type(err).__mro__} is not a {builtin.__name__}"
    assert isinstance(err, tg.TracegradError), f"{type(err).__name__} is outside the family"
    msg = str(err).lower()
    missing = [w for w in words if w.lower() not in msg]
    assert not missing, f"message {str(err)!r} lacks {missing}"
    assert THIS_FILE in str(err), f"message does not point at the user's line: {err}"
    if post is not None:
        assert post(tg, s) is not False
    _library_still_works(tg)


@pytest.mark.parametrize("bad,builtin,words,post", _cases())
def test_same_error_type_as_torch(bad, builtin, words, post):
    torch = pytest.importorskip("torch")
    s = {}
    theirs = _raised(bad, torch, s)
    assert isinstance(theirs, builtin), "the table's builtin type disagrees with torch"
    if post is not None:
        assert post(torch, s) is not False
    ours = _raised(bad, tg, {})
    assert issubclass(type(ours), _builtin_base(type(theirs)))
