"""Drawing of an eager autograd graph: the grad_fn nodes behind result tensors (torchviz-like).

One grey box per backward node (`MulBackward0`), edges in the direction data flowed forward
(operand's node -> consumer's node, labelled with the operand's type), each leaf that
requires grad as a light-blue box feeding its `AccumulateGrad`, tensors a node saved for
its backward in orange (one box per tensor, an edge to every node that saved it, labelled
with the operand position or `result`), the result tensor(s) in green.

The walk is breadth-first with an explicit queue (a 10,000-op chain needs no recursion);
ids are handed out in discovery order, so equal graphs print equal DOT.
"""
from collections import deque

from .._tensor import Tensor
from ..autograd.graph import AccumulateGrad
from .drawing import Drawing
from .style import Ids, short, type_str


def eager_drawing(roots, params=None):
    """A Drawing of the grad_fn graph reachable from `roots` (a Tensor or a sequence)."""
    roots = [roots] if isinstance(roots, Tensor) else list(roots)
    names = {id(t): name for name, t in (dict(params) if params else {}).items()}
    b = _Builder(names)
    for k, t in enumerate(roots):
        b.root(t, None if len(roots) == 1 else k)
    b.run()
    return b.d


class _Builder:
    def __init__(self, names):
        self.names = names
        self.d = Drawing("grad_fn")
        self.ids = Ids()
        self.node_ids = {}        # backward Node -> DOT id (Nodes hash by identity)
        self.tensor_ids = {}      # id(tensor) -> DOT id; the tensor stays referenced meanwhile
        self.queue = deque()

    def root(self, t, k):
        name = self.names.get(id(t))
        head = name or ("output" if k is None else f"output {k}")
        vid = self.d.add(self.ids.new("v"), "output", [head, type_str(t.shape, t.dtype)])
        fn = t.grad_fn
        if fn is not None:
            self.d.edge(self._visit(fn), vid, type_str(t.shape, t.dtype))

    def _visit(self, fn):
        nid = self.node_ids.get(fn)
        if nid is None:
            nid = self.node_ids[fn] = self.ids.new("n")
            self.queue.append(fn)
        return nid

    def run(self):
        while self.queue:
            fn = self.queue.popleft()
            nid = self.node_ids[fn]
            if isinstance(fn, AccumulateGrad):
                self._accumulate(fn, nid)
                continue
            self._node(fn, nid)
            for i, e in enumerate(fn.edges or ()):
                if e is not None and e[0] is not None:
                    self.d.edge(self._visit(e[0]), nid, _operand_type(fn, i))
            self._saved(fn, nid)

    def _node(self, fn, nid):
        lines = [fn.name()]
        path = getattr(fn, "path", None)
        if path is not None:
            lines.append(short(f"compiled {path.name}"))
        if getattr(fn, "released", False):
            lines.append("(saved values freed)")
        types = [_operand_type(fn, i) or "-" for i in range(len(fn.edges or ()))]
        tip = short("operands: " + ", ".join(types), 200) if types else None
        # every box here is a backward node: grey, as torchviz draws them
        self.d.add(nid, "bwd_op", lines, tooltip=tip, key=fn.name(), order=fn.seq)

    def _accumulate(self, fn, nid):
        self.d.add(nid, "accumulate", ["AccumulateGrad"], summary="")
        var = fn.variable
        if var is None:
            return
        lines = [type_str(var.shape, var.dtype)]
        name = self.names.get(id(var))
        if name:
            lines.insert(0, name)
        vid = self.ids.new("v")
        self.d.add(vid, "tensor_leaf", lines)
        self.d.edge(vid, nid)

    def _saved(self, fn, nid):
        saved = getattr(fn, "saved", None)
        ctx = getattr(fn, "ctx", None)
        if saved is None and ctx is not None:
            saved = getattr(ctx, "_saved", None)          # autograd.Function's save_for_backward
        for i, t in enumerate(saved or ()):
            if isinstance(t, Tensor):
                self.d.edge(self._saved_tensor(t), nid, f"input {i}", kind="saved")
        out = getattr(fn, "out_saved", None)
        if out is not None:
            vid = self.ids.new("v")
            self.d.add(vid, "saved", ["saved", type_str(out[0].shape, out[0].dtype)])
            self.d.edge(vid, nid, "result", kind="saved")
        for k, arr in enumerate(getattr(fn, "saved_arrays", None) or ()):
            vid = self.ids.new("v")
            self.d.add(vid, "saved", [f"saved {k}", type_str(arr.shape, arr.dtype)])
            self.d.edge(vid, nid, kind="saved")

    def _saved_tensor(self, t):
        vid = self.tensor_ids.get(id(t))
        if vid is None:
            vid = self.tensor_ids[id(t)] = self.ids.new("v")
            self.d.add(vid, "saved", [self.names.get(id(t), "saved"), type_str(t.shape, t.dtype)])
        return vid


def _operand_type(fn, i):
    shapes, dtypes = getattr(fn, "shapes", None), getattr(fn, "dtypes", None)
    if not shapes or i >= len(shapes) or dtypes is None or dtypes[i] is None:
        return None
    return type_str(shapes[i], dtypes[i])
