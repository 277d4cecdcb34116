"""`tg.utils.data` against PyTorch: collation rules, loader lengths and batching, option
errors, random_split lengths, and reproducible shuffling from tracegrad's Generator."""
import collections
import warnings

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.utils import data as D


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _plain(x):
    """A library-neutral picture of a batch: tensors become (dtype name, nested list)."""
    if hasattr(x, "dtype") and hasattr(x, "tolist") and not isinstance(x, np.ndarray):
        return ("T", str(x.dtype).replace("torch.", ""), x.tolist())
    if isinstance(x, dict):
        return (type(x).__name__, {k: _plain(v) for k, v in x.items()})
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_plain(v) for v in x])
    return x


Point = collections.namedtuple("Point", "x y")

SAMPLES = {
    "ints": [1, 2, 3],
    "floats": [1.5, 2.5],
    "bools": [True, False],
    "strings": ["a", "b"],
    "np_arrays": [np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32)],
    "np_scalars": [np.float32(1), np.float32(2)],
    "np_int": [np.int64(4), np.int64(5)],
    "tuples": [(1, 2.0, "a"), (3, 4.0, "b")],
    "lists": [[1, 2], [3, 4]],
    "dicts": [{"a": 1, "b": [1.0, 2.0]}, {"a": 2, "b": [3.0, 4.0]}],
    "ordered": [collections.OrderedDict(z=1, a=2), collections.OrderedDict(z=3, a=4)],
    "namedtuples": [Point(1, 2.0), Point(3, 4.0)],
    "nested": [({"k": (1, [2.0])},), ({"k": (3, [4.0])},)],
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_default_collate_matches_torch(torch, name):
    from torch.utils.data import default_collate as tc
    batch = SAMPLES[name]
    assert _plain(D.default_collate(batch)) == _plain(tc(batch))


def test_default_collate_tensors(torch):
    from torch.utils.data import default_collate as tc
    a = [tg.ones(2, 3) * i for i in range(4)]
    b = [torch.ones(2, 3) * i for i in range(4)]
    assert _plain(D.default_collate(a)) == _plain(tc(b))
    pairs_a = [(tg.tensor([i]), i) for i in range(3)]
    pairs_b = [(torch.tensor([i]), i) for i in range(3)]
    assert _plain(D.default_collate(pairs_a)) == _plain(tc(pairs_b))


def test_default_collate_errors():
    with pytest.raises(RuntimeError, match="equal size"):
        D.default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        D.default_collate([object(), object()])
    with pytest.raises(TypeError):
        D.default_collate([np.array(["a"]), np.array(["b"])])


def test_default_convert(torch):
    from torch.utils.data import default_convert as tc
    sample = {"x": np.arange(3), "y": (np.float64(2.0), "s", 5)}
    assert _plain(D.default_convert(sample)) == _plain(tc(sample))


def _ds(lib, n=10):
    return lib.utils.data.TensorDataset(lib.arange(float(n)), lib.arange(n))


@pytest.mark.parametrize("kw", [
    dict(), dict(batch_size=4), dict(batch_size=4, drop_last=True), dict(batch_size=3),
    dict(batch_size=None), dict(batch_size=10), dict(batch_size=20), dict(batch_size=20, drop_last=True),
])
def test_sequential_loader_matches_torch(torch, kw):
    a, b = tg.utils.data.DataLoader(_ds(tg), **kw), torch.utils.data.DataLoader(_ds(torch), **kw)
    assert len(a) == len(b)
    assert [_plain(x) for x in a] == [_plain(x) for x in b]


def test_batch_sampler_and_sampler_options(torch):
    for lib in (tg, torch):
        U = lib.utils.data
        bs = U.BatchSampler(U.SequentialSampler(range(7)), 3, False)
        assert list(bs) == [[0, 1, 2], [3, 4, 5], [6]] and len(bs) == 3
        bs = U.BatchSampler(range(7), 3, True)
        assert list(bs) == [[0, 1, 2], [3, 4, 5]] and len(bs) == 2
    dl = D.DataLoader(_ds(tg), batch_sampler=D.BatchSampler(range(10), 4, False))
    assert [b[1].tolist() for b in dl] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    dl = D.DataLoader(_ds(tg), sampler=[9, 8, 7], batch_size=2)
    assert [b[1].tolist() for b in dl] == [[9, 8], [7]]


@pytest.mark.parametrize("kw,msg", [
    (dict(sampler=[0], shuffle=True), "mutually exclusive with shuffle"),
    (dict(batch_sampler=[[0]], batch_size=3), "batch_sampler option is mutually exclusive"),
    (dict(batch_sampler=[[0]], drop_last=True), "batch_sampler option is mutually exclusive"),
    (dict(batch_size=None, drop_last=True), "disables auto-batching"),
    (dict(num_workers=-1), "num_workers option should be non-negative"),
    (dict(batch_size=0), "batch_size should be a positive integer"),
])
def test_loader_option_errors_match_torch(torch, kw, msg):
    for lib in (tg, torch):
        with pytest.raises(ValueError, match=msg):
            lib.utils.data.DataLoader(_ds(lib), **kw)


def test_sampler_errors(torch):
    for lib in (tg, torch):
        U = lib.utils.data
        with pytest.raises(ValueError, match="num_samples should be a positive integer"):
            U.RandomSampler(range(3), num_samples=0)
        with pytest.raises(TypeError, match="replacement should be a boolean"):
            U.RandomSampler(range(3), replacement=1)
        with pytest.raises(ValueError, match="drop_last should be a boolean"):
            U.BatchSampler(range(3), 2, drop_last=1)
        with pytest.raises(AssertionError, match="Size mismatch between tensors"):
            U.TensorDataset(lib.zeros(2), lib.zeros(3))
        with pytest.raises(NotImplementedError, match="should implement __getitem__"):
            U.Dataset()[0]


def test_shuffle_is_a_permutation_and_reproducible():
    ds = _ds(tg, 50)

    def epoch(loader):
        return [i for _, yb in loader for i in yb.tolist()]
    a = D.DataLoader(ds, batch_size=8, shuffle=True, generator=tg.Generator().manual_seed(3))
    b = D.DataLoader(ds, batch_size=8, shuffle=True, generator=tg.Generator().manual_seed(3))
    ea, eb = epoch(a), epoch(b)
    assert sorted(ea) == list(range(50)) and ea == eb and ea != list(range(50))
    assert epoch(a) != ea                          # the generator advances between epochs
    tg.manual_seed(7)
    c1 = epoch(D.DataLoader(ds, batch_size=8, shuffle=True))
    tg.manual_seed(7)
    c2 = epoch(D.DataLoader(ds, batch_size=8, shuffle=True))
    assert c1 == c2 and sorted(c1) == list(range(50))


def test_random_sampler_replacement_and_num_samples():
    g = tg.Generator().manual_seed(0)
    s = D.RandomSampler(range(5), replacement=True, num_samples=70, generator=g)
    out = list(s)
    assert len(out) == len(s) == 70 and set(out) <= set(range(5))
    s = D.RandomSampler(range(5), num_samples=12, generator=g)
    out = list(s)
    assert len(out) == 12 and sorted(out[:5]) == list(range(5)) and sorted(out[5:10]) == list(range(5))
    sub = list(D.SubsetRandomSampler([10, 20, 30], generator=g))
    assert sorted(sub) == [10, 20, 30]


@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.7], [0.33, 0.33, 0.34], [0.5, 0.5, 0.0],
                                     [10, 0]])
def test_random_split_lengths_match_torch(torch, lengths):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = D.random_split(range(10), lengths, generator=tg.Generator().manual_seed(0))
        b = torch.utils.data.random_split(range(10), lengths,
                                          generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in a] == [len(s) for s in b]
    assert sorted(i for s in a for i in s) == list(range(10))


def test_random_split_errors_and_reproducibility():
    with pytest.raises(ValueError, match="Sum of input lengths"):
        D.random_split(range(10), [3, 3])
    with pytest.raises(ValueError, match="Sum of input lengths"):
        D.random_split(range(10), [0.5, 0.6])
    with pytest.warns(UserWarning, match="Length of split at index 2 is 0"):
        D.random_split(range(3), [0.5, 0.5, 0.0])
    s1 = D.random_split(range(20), [0.5, 0.5], generator=tg.Generator().manual_seed(1))
    s2 = D.random_split(range(20), [0.5, 0.5], generator=tg.Generator().manual_seed(1))
    assert [list(s) for s in s1] == [list(s) for s in s2]
    assert isinstance(s1[0], D.Subset) and s1[0].dataset == range(20)


def test_subset_concat_and_custom_dataset():
    class Squares(D.Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"x": np.array([i, i], np.float32), "y": i * i}

    sub = D.Subset(Squares(), [4, 0])
    assert len(sub) == 2 and sub[0]["y"] == 16
    cat = Squares() + Squares()
    assert len(cat) == 10 and cat[7]["y"] == 4 and cat[-1]["y"] == 16
    batch = next(iter(D.DataLoader(cat, batch_size=3)))
    assert batch["x"].dtype is tg.float32 and batch["x"].shape == (3, 2)
    assert batch["y"].tolist() == [0, 1, 4] and batch["y"].dtype is tg.int64


def test_iterable_dataset():
    class Stream(D.IterableDataset):
        def __iter__(self):
            return iter(range(7))

    assert [b.tolist() for b in D.DataLoader(Stream(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in D.DataLoader(Stream(), batch_size=3, drop_last=True)] == [
        [0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="expected unspecified shuffle"):
        D.DataLoader(Stream(), shuffle=True)


def test_num_workers_accepted_same_batches():
    ds = _ds(tg, 9)
    a = [b[1].tolist() for b in D.DataLoader(ds, batch_size=4, num_workers=2)]
    assert a == [[0, 1, 2, 3], [4, 5, 6, 7], [8]] and D.get_worker_info() is None


def test_training_loop_with_loader():
    tg.manual_seed(0)
    x = tg.randn(64, 3)
    y = x @ tg.tensor([[1.0], [-2.0], [0.5]])
    model = tg.nn.Linear(3, 1)
    opt = tg.optim.SGD(model.parameters(), lr=0.1)
    loader = D.DataLoader(D.TensorDataset(x, y), batch_size=16, shuffle=True,
                          generator=tg.Generator().manual_seed(0))
    for _ in range(30):
        for xb, yb in loader:
            opt.zero_grad()
            ((model(xb) - yb) ** 2).mean().backward()
            opt.step()
    np.testing.assert_allclose(model.weight.detach().numpy(), [[1.0, -2.0, 0.5]], atol=1e-3)
