"""A character-level GPT trained on text that ships with Python, with a compiled training step.

The model is the minimal GPT every PyTorch user has read (token and position embeddings,
blocks of causal self-attention and a GELU MLP with pre-LayerNorm residuals, the causal mask
a registered `tril` buffer, the token embedding tied to the output head), written with
`import tracegrad as torch`. The corpus is the Zen of Python (`this`) followed by a few
standard-library modules' own sources, read from `os.path.dirname(os.__file__)`.

Training: AdamW with decay / no-decay parameter groups, warmup then cosine decay through
`lr_scheduler.LambdaLR`, and one compiled function per step
(`zero_grad`, forward, `backward`, `clip_grad_norm_`, `step`, `scheduler.step()`); the learning
rate changes every step without re-tracing. It prints samples (`generate` with temperature
and top-k, drawing with `multinomial`) as it learns, checkpoints model, optimizer, scheduler,
batching generator and step with `torch.save`, and `--resume` continues from a checkpoint to
exactly the parameters an uninterrupted run reaches. The loss curve is saved to
`docs/img/char_gpt.png`.

    python examples/char_gpt.py                      # 2 layers, 64-dim, block 64, 1500 steps
    python examples/char_gpt.py --steps 3000 --resume   # continue the saved run
    python examples/char_gpt.py --smoke              # a few steps of a tiny model

Needs tqdm and matplotlib (`pip install tqdm matplotlib`). The full run takes about 100 s
on two busy cores with `OPENBLAS_NUM_THREADS=1` (BLAS threads fighting over few shared cores
made it 3-4x slower). The MLP uses `GELU(approximate="tanh")`, as GPT-2 did: tracegrad's
exact GELU evaluates erf one element at a time and is ~15x slower at this size.
"""
import argparse
import contextlib
import io
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass

import matplotlib
from tqdm import tqdm

matplotlib.use("Agg")                   # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
import tracegrad as torch  # noqa: E402
from tracegrad import nn  # noqa: E402
from tracegrad.nn import functional as F  # noqa: E402

STDLIB_SOURCES = ("textwrap.py", "heapq.py", "bisect.py", "functools.py", "contextlib.py",
                  "fractions.py", "statistics.py", "string.py", "random.py", "shlex.py",
                  "queue.py", "copy.py", "graphlib.py", "numbers.py", "operator.py",
                  "reprlib.py", "colorsys.py", "weakref.py")


@dataclass
class GPTConfig:
    vocab_size: int
    block_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        t = cfg.block_size
        self.register_buffer("bias", torch.tril(torch.ones(t, t)).view(1, 1, t, t))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * cfg.n_embd, cfg.n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight          # weight tying
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        pos = torch.arange(T)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    def configure_optimizer(self, lr, weight_decay):
        """AdamW; matrices (weights of Linear and Embedding) decay, biases and norms don't."""
        params = dict(self.named_parameters())
        decay = [p for p in params.values() if p.dim() >= 2]
        no_decay = [p for p in params.values() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay},
                  {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
        for _ in range(max_new_tokens):
            idx_cond = idx[:, -self.cfg.block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = float("-inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1, generator=generator)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


def load_corpus():
    """The Zen of Python, then a few standard-library modules' sources."""
    with contextlib.redirect_stdout(io.StringIO()):
        import this                              # prints the Zen on first import
    parts = ["".join(this.d.get(c, c) for c in this.s)]     # the Zen is stored rot13-encoded
    libdir = os.path.dirname(os.__file__)
    for name in STDLIB_SOURCES:
        path = os.path.join(libdir, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                parts.append(f.read())
    return "\n".join(parts)


def get_batch(data, block, batch, generator):
    ix = torch.randint(len(data) - block - 1, (batch,), generator=generator)
    offsets = ix.unsqueeze(1) + torch.arange(block)
    return data[offsets], data[offsets + 1]


@torch.no_grad()
def estimate_loss(model, data, block, batch, batches):
    """Mean loss over a fixed set of held-out batches (own generator: training RNG untouched)."""
    model.eval()
    g = torch.Generator().manual_seed(0)
    total = 0.0
    for _ in range(batches):
        x, y = get_batch(data, block, batch, g)
        total += model(x, y)[1].item()
    model.train()
    return total / batches


def lr_lambda(warmup, total):
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))
    return factor


def plot(losses, val, path):
    fig, ax = plt.subplots(figsize=(7, 3.5))
    steps = range(1, len(losses) + 1)
    ax.plot(steps, losses, alpha=0.35, label="batch loss")
    k = max(1, len(losses) // 50)
    smooth = [sum(losses[max(0, i - k):i + 1]) / len(losses[max(0, i - k):i + 1])
              for i in range(len(losses))]
    ax.plot(steps, smooth, label=f"running mean ({k + 1} steps)")
    if val:
        ax.plot(*zip(*val), "o-", label="held-out loss")
    ax.set(title="tracegrad: character-level GPT on Python's own sources",
           xlabel="step", ylabel="cross-entropy (nats/char)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="a few steps of a tiny model")
    p.add_argument("--steps", type=int, default=None,
                   help="train until this step (the learning-rate schedule spans 1500 steps, "
                        "8 with --smoke; later steps keep its final rate)")
    p.add_argument("--resume", action="store_true", help="continue from --ckpt")
    p.add_argument("--ckpt", default=None, help="checkpoint path")
    p.add_argument("--plot", default=None, help="where to save the loss plot")
    p.add_argument("--seed", type=int, default=1337)
    args = p.parse_args(argv)
    tmp = tempfile.gettempdir()
    if args.smoke:
        args.steps, args.decay = args.steps or 8, 8
        args.ckpt = args.ckpt or os.path.join(tmp, "char_gpt_smoke.pt")
        args.plot = args.plot or os.path.join(tmp, "char_gpt_smoke.png")
        args.size = dict(block_size=16, n_layer=1, n_head=2, n_embd=16)
        args.batch, args.sample_every, args.sample_len, args.val_batches = 4, 4, 40, 2
    else:
        args.steps, args.decay = args.steps or 1500, 1500
        args.ckpt = args.ckpt or os.path.join(tmp, "char_gpt.pt")
        args.plot = args.plot or os.path.normpath(os.path.join(ROOT, "docs/img/char_gpt.png"))
        args.size = dict(block_size=64, n_layer=2, n_head=4, n_embd=64)
        args.batch, args.sample_every, args.sample_len, args.val_batches = 32, 300, 200, 16
    return args


def sample(model, encode, decode, n, step):
    model.eval()
    g = torch.Generator().manual_seed(step)        # sampling never touches training RNG
    out = model.generate(torch.tensor([encode("def ")]), n, temperature=0.8, top_k=20,
                         generator=g)
    model.train()
    return decode(out[0].tolist())


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    text = load_corpus()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    encode = lambda s: [stoi[c] for c in s]                        # noqa: E731
    decode = lambda ids: "".join(chars[i] for i in ids)            # noqa: E731
    data = torch.tensor(encode(text))
    n_train = int(0.9 * len(data))
    train_data, val_data = data[:n_train], data[n_train:]
    print(f"corpus: {len(text):,} characters ({n_train:,} train, {len(val_data):,} held out), "
          f"vocabulary {len(chars)}")

    cfg = GPTConfig(vocab_size=len(chars), **args.size)
    model = GPT(cfg)
    print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters, {cfg}")
    opt = model.configure_optimizer(lr=3e-3, weight_decay=0.1)
    # the schedule's horizon is fixed by the configuration, not by --steps, so a run stopped
    # early and resumed follows the same learning rates as an uninterrupted one
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(args.decay // 10, args.decay))
    batch_gen = torch.Generator().manual_seed(args.seed)
    losses, val, start = [], [], 0
    if args.resume:
        ckpt = torch.load(args.ckpt)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        sched.load_state_dict(ckpt["scheduler"])
        batch_gen.set_state(ckpt["generator"])
        losses, val, start = ckpt["losses"], [tuple(v) for v in ckpt["val"]], ckpt["step"]
        print(f"resumed from {args.ckpt} at step {start}")

    @torch.compile
    def train_step(x, y):
        opt.zero_grad()
        _, loss = model(x, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        return loss

    t0 = time.perf_counter()
    bar = tqdm(range(start, args.steps), initial=start, total=args.steps, desc="steps")
    for step in bar:
        x, y = get_batch(train_data, cfg.block_size, args.batch, batch_gen)
        losses.append(train_step(x, y).item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}", lr=f"{sched.get_last_lr()[0]:.2e}")
        if (step + 1) % args.sample_every == 0 or step + 1 == args.steps:
            val.append((step + 1, estimate_loss(model, val_data, cfg.block_size, args.batch,
                                                args.val_batches)))
            tqdm.write(f"--- step {step + 1}, loss {losses[-1]:.3f}, held-out {val[-1][1]:.3f}, "
                       "sample:\n"
                       f"{sample(model, encode, decode, args.sample_len, step)}\n---")
    seconds = time.perf_counter() - t0
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(), "generator": batch_gen.get_state(),
                "step": args.steps, "losses": losses, "val": val}, args.ckpt)
    tail = losses[-20:] or [float("nan")]
    print(f"steps {start}..{args.steps} in {seconds:.1f} s; final loss {losses[-1]:.4f} "
          f"(mean of last {len(tail)}: {sum(tail) / len(tail):.4f})")
    if val:
        print(f"held-out loss at step {val[-1][0]}: {val[-1][1]:.4f}")
    print(f"compiled step: {train_step.stats}")
    print(f"checkpoint saved to {args.ckpt}")
    plot(losses, val, args.plot)
    print(f"loss plot saved to {args.plot}")


if __name__ == "__main__":
    main()
