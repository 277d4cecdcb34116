"""Adversarial review of compiled training loops over time: what happens between compiled
steps (checkpoints loaded, layers frozen, schedulers stepped, train/eval toggled, batches of
another size), written the way PyTorch tutorials write it. Compiled must equal eager
(bitwise on numpy) on every call, or run eagerly with a warning; and what a tutorial changes
once an epoch must not make a compiled step re-trace."""
import copy
import io
import warnings

import pytest

import tracegrad as tg

nn, F = tg.nn, tg.nn.functional
S = tg.optim.lr_scheduler


def _fp(x):
    """Bytes of everything observable in `x` (tensors with dtype, shape, flag and .grad)."""
    if isinstance(x, tg.Tensor):
        a = x.detach().numpy()
        g = x.grad if x.is_leaf else None
        return ("T", a.dtype.str, a.shape, a.tobytes(), x.requires_grad, _fp(g))
    if isinstance(x, dict):
        return tuple((k if not isinstance(k, tg.Tensor) else id(k), _fp(v))
                     for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return tuple(_fp(v) for v in x)
    if isinstance(x, float):
        return repr(x)
    return x


def _state(model, *opts):
    out = [(n, _fp(p)) for n, p in model.named_parameters()]
    out += [(n, _fp(b)) for n, b in model.named_buffers()]
    for o in opts:
        out.append(_fp(o.state_dict()))
    return out


def _eager_and_compiled(run):
    """`run(compile)` eagerly (compile is the identity) and compiled: both logs and the
    compiled functions made."""
    logs, made = [], []

    def comp(f):
        c = tg.compile(f)
        made.append(c)
        return c
    for compiled in (False, True):
        tg.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")       # no fallback warning either
            logs.append(run(comp if compiled else (lambda f: f)))
    return logs[0], logs[1], made


# --- Note [Hyper-parameters unread] in compiler/state_unread.py ---

def test_an_evaluation_phase_that_only_zeroes_grads_never_retraces_on_a_scheduler_step():
    # the transfer-learning tutorial's loop: one function for both phases, the validation
    # phase calling optimizer.zero_grad() but never step(); StepLR once an epoch. The "val"
    # path guarded the learning rate it never reads and re-traced every epoch, until
    # cache_limit made it run eagerly for good.
    def run(comp):
        model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.2),
                              nn.Linear(8, 3))
        criterion = nn.CrossEntropyLoss()
        optimizer = tg.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        scheduler = S.StepLR(optimizer, step_size=1, gamma=0.5)

        def run_batch(inputs, labels, phase):
            optimizer.zero_grad()
            with tg.set_grad_enabled(phase == "train"):
                outputs = model(inputs)
                _, preds = tg.max(outputs, 1)
                loss = criterion(outputs, labels)
                if phase == "train":
                    loss.backward()
                    optimizer.step()
            return loss, preds
        run_batch = comp(run_batch)
        log = []
        for epoch in range(12):
            for phase in ["train", "val"]:
                model.train() if phase == "train" else model.eval()
                for _ in range(2):
                    x, y = tg.randn(4, 4), tg.randint(0, 3, (4,))
                    loss, preds = run_batch(x, y, phase)
                    log.append((_fp(loss), _fp(preds), _state(model, optimizer)))
            scheduler.step()
        return log
    eager, compiled, (f,) = _eager_and_compiled(run)
    assert compiled == eager
    assert f.stats.eager_calls == 0
    assert not any("lr" in r for r in f.stats.retraces), f.stats.retraces


def test_a_trainers_compiled_evaluate_never_retraces_on_a_scheduler_step():
    class Trainer:
        def __init__(self):
            self.model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
            self.opt = tg.optim.Adam(self.model.parameters(), lr=0.01)
            self.sched = S.OneCycleLR(self.opt, max_lr=0.1, total_steps=40)   # betas too

        @tg.compile
        def evaluate(self, x, y):
            with tg.no_grad():
                return F.cross_entropy(self.model(x), y)

    t = Trainer()
    x, y = tg.randn(5, 4), tg.randint(0, 3, (5,))
    for _ in range(12):
        t.model.zero_grad()
        F.cross_entropy(t.model(x), y).backward()
        t.opt.step()
        t.sched.step()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = t.evaluate(x, y)
        with tg.no_grad():
            assert got.numpy().tobytes() == F.cross_entropy(t.model(x), y).numpy().tobytes()
    assert t.evaluate.stats.traces == 1, t.evaluate.stats.retraces


def _scaled_by_subscript(out, opt):
    return out * opt.param_groups[0]["lr"]


def _scaled_by_items(out, opt):
    return out * sum(v for k, v in opt.param_groups[0].items() if k[0] == "l")


def _scaled_by_state_dict(out, opt):
    g = opt.state_dict()["param_groups"][0]         # (a copy; no key spelled)
    return out * [g[k] for k in sorted(g) if k[0] == "l"][0]


@pytest.mark.parametrize("read", [_scaled_by_subscript, _scaled_by_items,
                                  _scaled_by_state_dict])
def test_a_path_without_step_that_reads_the_lr_itself_stays_guarded(read):
    model = nn.Linear(4, 3)
    opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def scaled(x):
        with tg.no_grad():
            out = model(x).sum()
        return read(out, opt)
    f = tg.compile(scaled)
    x = tg.randn(2, 4)
    for _ in range(4):
        opt.param_groups[0]["lr"] *= 0.5
        assert f(x).numpy().tobytes() == scaled(x).numpy().tobytes()


def _logged_by_items(opt):
    return {k: v for k, v in opt.param_groups[0].items() if k != "params"}


def _logged_by_state_dict(opt):
    return opt.state_dict()["param_groups"][0]


@pytest.mark.parametrize("hparams", [_logged_by_items, _logged_by_state_dict])
def test_a_step_returning_its_hyper_parameters_for_logging_is_never_stale(hparams):
    # the step reads the learning rate per call (a runtime value), but the dict it returns
    # held the value the trace saw: every later call returned the first epoch's lr
    def run(comp):
        model = _mlp()
        opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = S.StepLR(opt, step_size=1, gamma=0.5)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss, hparams(opt)
        f, log = comp(step), []
        for _ in range(4):
            loss, hp = f(tg.randn(5, 4), tg.randint(0, 3, (5,)))
            log.append((_fp(loss), hp["lr"], hp["momentum"], _state(model, opt)))
            sched.step()
        return log
    eager, compiled, _ = _eager_and_compiled(run)
    assert compiled == eager


# --- what happens between steps: each compared with eager over several epochs ---

def _mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))


def _train_step(model, opt, set_to_none=True):
    def step(x, y):
        opt.zero_grad(set_to_none=set_to_none)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


@pytest.mark.parametrize("fresh", [False, True])
def test_resuming_from_a_checkpoint_between_compiled_steps_equals_eager(fresh):
    def run(comp):
        objs = {}

        def make():
            objs["m"] = _mlp()
            objs["o"] = tg.optim.AdamW(objs["m"].parameters(), lr=0.01, amsgrad=True)
            objs["s"] = S.CosineAnnealingLR(objs["o"], T_max=5)

        def step(x, y):
            m, o, s = objs["m"], objs["o"], objs["s"]
            o.zero_grad()
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            o.step()
            s.step()
            return loss
        make()
        f, log, buf = comp(step), [], io.BytesIO()
        for i in range(9):
            if i == 3:
                tg.save({"m": objs["m"].state_dict(), "o": objs["o"].state_dict(),
                         "s": objs["s"].state_dict()}, buf)
            if i == 6:
                buf.seek(0)
                ck = tg.load(buf)
                if fresh:
                    make()
                objs["m"].load_state_dict(ck["m"])
                objs["o"].load_state_dict(ck["o"])
                objs["s"].load_state_dict(ck["s"])
            loss = f(tg.randn(5, 4), tg.randint(0, 3, (5,)))
            log.append((_fp(loss), _state(objs["m"], objs["o"]), objs["s"].get_last_lr()))
        return log
    eager, compiled, _ = _eager_and_compiled(run)
    assert compiled == eager


@pytest.mark.parametrize("set_to_none", [True, False])
def test_freezing_and_unfreezing_an_encoder_between_steps_equals_eager(set_to_none):
    def run(comp):
        model = _mlp()
        opt = tg.optim.Adam(model.parameters(), lr=0.01)
        f, log = comp(_train_step(model, opt, set_to_none)), []
        for i in range(8):
            if i in (2, 5):
                for p in model[0].parameters():
                    p.requires_grad = i == 5
            loss = f(tg.randn(5, 4), tg.randint(0, 3, (5,)))
            log.append((_fp(loss), _state(model, opt)))
        return log
    eager, compiled, _ = _eager_and_compiled(run)
    assert compiled == eager


def test_an_ema_copy_updated_between_compiled_steps_equals_eager():
    def run(comp):
        model = _mlp()
        ema = copy.deepcopy(model)
        opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)

        def step(x, y):
            opt.zero_grad()
            out = model(x)
            loss = F.cross_entropy(out, y) + 0.1 * (out - ema(x)).pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        f, log = comp(step), []
        for i in range(6):
            loss = f(tg.randn(5, 4), tg.randint(0, 3, (5,)))
            with tg.no_grad():
                for pe, p in zip(ema.parameters(), model.parameters()):
                    pe.mul_(0.9).add_(p, alpha=0.1)
            log.append((_fp(loss), _state(model, opt), _state(ema)))
        return log
    eager, compiled, _ = _eager_and_compiled(run)
    assert compiled == eager


def test_accumulating_over_micro_batches_with_a_step_every_k_calls_equals_eager():
    def run(comp):
        model = _mlp()
        opt = tg.optim.Adam(model.parameters(), lr=0.01)

        def step(x, y, do_step):
            loss = F.cross_entropy(model(x), y) / 3
            loss.backward()
            if do_step:
                opt.step()
                opt.zero_grad(set_to_none=False)
            return loss
        f, log = comp(step), []
        opt.zero_grad(set_to_none=False)
        for i in range(9):
            loss = f(tg.randn(5, 4), tg.randint(0, 3, (5,)), (i + 1) % 3 == 0)
            log.append((_fp(loss), _state(model, opt)))
        return log
    eager, compiled, _ = _eager_and_compiled(run)
    assert compiled == eager


def test_a_dataloaders_last_partial_batch_and_back_equals_eager():
    from tracegrad.utils.data import DataLoader, TensorDataset

    def run(comp):
        X, Y = tg.randn(14, 4), tg.randint(0, 3, (14,)).to(tg.int32)
        g = tg.Generator()
        g.manual_seed(3)
        loader = DataLoader(TensorDataset(X, Y), batch_size=4, shuffle=True, generator=g)
        model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
        opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(batch):
            x, y = batch
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y.long())
            loss.backward()
            opt.step()
            return {"loss": loss, "n": x.shape[0]}
        f, log = comp(step), []
        for _ in range(3):
            for batch in loader:
                out = f(batch)
                log.append((_fp(out["loss"]), out["n"], _state(model, opt)))
        return log
    eager, compiled, _ = _eager_and_compiled(run)
    assert compiled == eager
