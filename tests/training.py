"""A whole training step as PyTorch users write it (model, SGD with momentum, zero_grad /
backward / step, the loss returned as is), shared by tests of the compiled training idiom."""
import tracegrad as tg


def sgd_step(sizes=(4, 6, 3), act=None, set_to_none=True, retain=False, seed=0,
             make_opt=None):
    """(model, optimizer, step) with `step(x, y) -> loss`, not compiled; the same seed gives
    the same parameters. `make_opt(parameters)`: another optimizer than SGD momentum 0.9."""
    tg.manual_seed(seed)
    act = act or tg.nn.Tanh
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(tg.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(act())
    model = tg.nn.Sequential(*layers)
    opt = (make_opt or (lambda ps: tg.optim.SGD(ps, lr=0.1, momentum=0.9)))(
        model.parameters())

    def step(x, y):
        opt.zero_grad(set_to_none=set_to_none)
        out = model(x)
        if retain:
            out.retain_grad()
        loss = tg.nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss
    return model, opt, step
