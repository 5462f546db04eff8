"""The programs of ``bench_suite.py``: one math definition per program, written against a NumPy-like
namespace ``xp`` (``dsl.numpy``, ``numpy`` or ``jax.numpy``), plus PyTorch eager versions.

Each ``Program`` builds its inputs and four callables (dslc, NumPy forward, JAX, PyTorch), each
returning the values that are compared before timing: the loss (or the program's output) first,
then the gradients. NumPy is forward only (hand-written); its output is compared with the first
value. JAX and PyTorch are imported lazily: they are optional (the ``bench`` extra).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dsl
import dsl.numpy as dnp

F32 = np.float32
LR = 0.01
LN_EPS = 1e-5


@dataclass
class Program:
    name: str
    description: str
    args: tuple[Any, ...]
    dslc: Any  # the dsl.compile'd callable
    numpy: Callable[..., Any]
    jax: Callable[[], Callable[..., Any] | None] | None = None  # builds the jitted fn (None: no JAX form)
    torch: Callable[[], Callable[..., Any] | None] | None = None
    tol: float = 1e-4  # allclose rtol (atol scales with the values' magnitude)
    mutates: bool = False  # calls change the arguments (training step): checks restart from a copy
    numpy_is_forward: bool = True  # the NumPy form computes only the first value
    bytes_moved: int = 0  # for bandwidth figures (elementwise chain only)
    jax_args: Callable[[Any], tuple[Any, ...]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---- 1. elementwise chain --------------------------------------------------------------------------


def chain(xp: Any, x: Any) -> Any:
    a = x * 1.5
    b = a + 0.5
    c = b * x
    d = c - 2.0
    e = x * x
    f = e + 1.0
    g = d / f
    return xp.maximum(g, 0.0)


def chain_numpy(x: np.ndarray) -> np.ndarray:  # f32 literals: NumPy 1.x would promote to f64
    return chain(np, x)


def chain_program(n: int) -> Program:
    x = _rng().standard_normal(n).astype(F32)

    def jax_fn() -> Callable[..., Any]:
        import jax
        import jax.numpy as jnp

        return jax.jit(lambda x: chain(jnp, x))

    def torch_fn() -> Callable[..., Any]:
        import torch

        return lambda x: torch.clamp_min(((x * 1.5 + 0.5) * x - 2.0) / (x * x + 1.0), 0.0)

    return Program(
        "elementwise chain",
        f"8 elementwise ops over {n:.0e} f32 (one fused kernel)",
        (x,),
        dsl.compile(lambda x: chain(dnp, x)),
        chain_numpy,
        jax_fn,
        torch_fn,
        tol=1e-5,
        bytes_moved=2 * x.nbytes,
    )


# ---- 2. softmax + cross-entropy ---------------------------------------------------------------------


def stop_gradient(xp: Any, v: Any) -> Any:
    """The max subtracted before ``exp`` carries no gradient (as in jax.nn and torch's softmax)."""
    if xp is dnp:
        return dsl.stop_gradient(v)
    if xp is np:
        return v
    if isinstance(xp, _TorchNp):
        return v.detach()
    import jax

    return jax.lax.stop_gradient(v)


def log_softmax(xp: Any, z: Any) -> Any:
    s = z - stop_gradient(xp, z.max(axis=-1, keepdims=True))
    return s - xp.log(xp.exp(s).sum(axis=-1, keepdims=True))


def xent(xp: Any, z: Any, onehot: Any) -> Any:
    return -(onehot * log_softmax(xp, z)).sum() / z.shape[0]


def _torch_xent(torch: Any, z: Any, onehot: Any) -> Any:
    return -(onehot * torch.log_softmax(z, dim=-1)).sum() / z.shape[0]


def xent_program(batch: int, classes: int) -> Program:
    rng = _rng(1)
    z = rng.standard_normal((batch, classes)).astype(F32)
    onehot = np.eye(classes, dtype=F32)[rng.integers(0, classes, batch)]

    def jax_fn() -> Callable[..., Any]:
        import jax
        import jax.numpy as jnp

        return jax.jit(jax.value_and_grad(lambda z, y: xent(jnp, z, y)))

    def torch_fn() -> Callable[..., Any]:
        import torch

        def step(z: Any, y: Any) -> tuple[Any, Any]:
            z = z.detach().requires_grad_(True)
            loss = _torch_xent(torch, z, y)
            loss.backward()
            return loss, z.grad

        return step

    return Program(
        "softmax + cross-entropy",
        f"forward+backward, logits {batch}x{classes} f32, gradient w.r.t. the logits",
        (z, onehot),
        dsl.value_and_grad(lambda z, y: xent(dnp, z, y)),
        lambda z, y: xent(np, z, y),
        jax_fn,
        torch_fn,
    )


# ---- 3. layer norm ---------------------------------------------------------------------------------


def layer_norm(xp: Any, x: Any, gamma: Any, beta: Any) -> Any:
    mu = x.mean(axis=-1, keepdims=True)
    c = x - mu
    var = (c * c).mean(axis=-1, keepdims=True)
    return c / xp.sqrt(var + LN_EPS) * gamma + beta


def ln_loss(xp: Any, x: Any, gamma: Any, beta: Any, r: Any) -> Any:
    return (layer_norm(xp, x, gamma, beta) * r).sum()


def layernorm_program(rows: int, width: int) -> Program:
    rng = _rng(2)
    x = rng.standard_normal((rows, width)).astype(F32)
    gamma = (1 + 0.1 * rng.standard_normal(width)).astype(F32)
    beta = (0.1 * rng.standard_normal(width)).astype(F32)
    r = rng.standard_normal((rows, width)).astype(F32)  # the upstream cotangent

    def jax_fn() -> Callable[..., Any]:
        import jax
        import jax.numpy as jnp

        return jax.jit(jax.value_and_grad(lambda *a: ln_loss(jnp, *a), argnums=(0, 1, 2)))

    def torch_fn() -> Callable[..., Any]:
        import torch

        def step(x: Any, g: Any, b: Any, r: Any) -> tuple[Any, ...]:
            x, g, b = (t.detach().requires_grad_(True) for t in (x, g, b))
            y = torch.nn.functional.layer_norm(x, (x.shape[-1],), g, b, LN_EPS)
            loss = (y * r).sum()
            loss.backward()
            return loss, (x.grad, g.grad, b.grad)

        return step

    return Program(
        "layer norm",
        f"forward+backward, {rows}x{width} f32, gradients w.r.t. x, gamma, beta",
        (x, gamma, beta, r),
        dsl.value_and_grad(lambda *a: ln_loss(dnp, *a), argnums=(0, 1, 2)),
        lambda *a: ln_loss(np, *a),
        jax_fn,
        torch_fn,
        tol=2e-3,
    )


# ---- 4. MLP training step ----------------------------------------------------------------------------


def mlp_loss(xp: Any, params: Sequence[tuple[Any, Any]], x: Any, onehot: Any) -> Any:
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = xp.tanh(h)
    return xent(xp, h, onehot)


def mlp_step_dsl(params: Any, x: Any, onehot: Any) -> Any:
    loss, grads = dsl.value_and_grad(lambda p: mlp_loss(dnp, p, x, onehot))(params)
    for (w, b), (gw, gb) in zip(params, grads):  # SGD, in place in the caller's arrays
        w -= LR * gw
        b -= LR * gb
    return loss


def mlp_params(sizes: Sequence[int], seed: int = 3) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = _rng(seed)
    return [
        ((rng.standard_normal((m, n)) / np.sqrt(m)).astype(F32), (0.1 * rng.standard_normal(n)).astype(F32))
        for m, n in zip(sizes[:-1], sizes[1:])
    ]


def mlp_program(batch: int, sizes: Sequence[int]) -> Program:
    rng = _rng(4)
    params = mlp_params(sizes)
    x = rng.standard_normal((batch, sizes[0])).astype(F32)
    onehot = np.eye(sizes[-1], dtype=F32)[rng.integers(0, sizes[-1], batch)]

    def jax_fn() -> Callable[..., Any]:
        import jax
        import jax.numpy as jnp

        def step(p: Any, x: Any, y: Any) -> Any:
            loss, g = jax.value_and_grad(lambda p: mlp_loss(jnp, p, x, y))(p)
            return loss, jax.tree_util.tree_map(lambda a, b: a - LR * b, p, g)

        return jax.jit(step, donate_argnums=0)

    def torch_fn() -> Callable[..., Any]:
        import torch

        def step(p: Any, x: Any, y: Any) -> Any:
            h = x
            for i, (w, b) in enumerate(p):
                h = h @ w + b
                if i < len(p) - 1:
                    h = torch.tanh(h)
            loss = _torch_xent(torch, h, y)
            loss.backward()
            with torch.no_grad():
                for w, b in p:
                    w.sub_(LR * w.grad)
                    b.sub_(LR * b.grad)
                    w.grad = b.grad = None
            return loss, p

        return step

    return Program(
        "MLP training step",
        f"6-layer tanh MLP {'-'.join(map(str, sizes))}, batch {batch} f32: value_and_grad + SGD in place",
        (params, x, onehot),
        dsl.compile(mlp_step_dsl),
        lambda p, x, y: mlp_loss(np, p, x, y),
        jax_fn,
        torch_fn,
        tol=1e-3,
        mutates=True,
    )


# ---- 5. second derivative of a tanh MLP w.r.t. its input ---------------------------------------------


def u(xp: Any, params: Sequence[tuple[Any, Any]], x: Any) -> Any:
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = xp.tanh(h)
    return h


def d2u_dsl(params: Any, x: Any) -> Any:
    du = lambda x: dsl.grad(lambda x: u(dnp, params, x).sum())(x)  # noqa: E731
    return dsl.grad(lambda x: du(x).sum())(x)


def d2u_numpy(params: Sequence[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> np.ndarray:
    """Hand-written: value, first and second derivative pushed forward together (x is 1-D per row)."""
    h, dh, ddh = x, np.ones_like(x), np.zeros_like(x)
    for i, (w, b) in enumerate(params):
        z, dz, ddz = h @ w + b, dh @ w, ddh @ w
        if i == len(params) - 1:
            return ddz
        t = np.tanh(z)
        s = 1 - t * t
        h, dh, ddh = t, s * dz, s * ddz - 2 * t * s * dz * dz
    raise AssertionError("no layers")


def d2u_program(width: int, batch: int) -> Program:
    rng = _rng(5)
    params = mlp_params([1] + [width] * 5 + [1], seed=6)
    x = rng.uniform(-2.0, 2.0, (batch, 1)).astype(F32)

    def jax_fn() -> Callable[..., Any]:
        import jax
        import jax.numpy as jnp

        def d2(p: Any, x: Any) -> Any:
            du = lambda x: jax.grad(lambda x: u(jnp, p, x).sum())(x)  # noqa: E731
            return jax.grad(lambda x: du(x).sum())(x)

        return jax.jit(d2)

    def torch_fn() -> Callable[..., Any]:
        import torch

        def d2(p: Any, x: Any) -> Any:
            x = x.detach().requires_grad_(True)
            y = u(torch, p, x)
            (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
            (gg,) = torch.autograd.grad(g.sum(), x)
            return gg

        return d2

    return Program(
        "second derivative",
        f"d2u/dx2 of a 6-layer tanh MLP 1-{width}x5-1 w.r.t. its input, batch {batch} f32 (nested grad)",
        (params, x),
        dsl.compile(d2u_dsl),
        d2u_numpy,
        jax_fn,
        torch_fn,
        tol=2e-3,
        numpy_is_forward=False,
    )


# ---- 6. transformer block ------------------------------------------------------------------------------


def transformer_block(xp: Any, p: dict[str, Any], x: Any, heads: int) -> Any:
    """Pre-norm block: x + attention(ln(x)), then + MLP(ln(.)) with GELU (tanh form); x is (B, T, D)."""
    batch, seq, width = x.shape
    dh = width // heads

    def ln(v: Any) -> Any:
        mu = v.mean(axis=-1, keepdims=True)
        c = v - mu
        return c / xp.sqrt((c * c).mean(axis=-1, keepdims=True) + LN_EPS)

    def split(v: Any) -> Any:  # (B*T, D) -> (B, H, T, dh)
        return xp.transpose(v.reshape(batch, seq, heads, dh), (0, 2, 1, 3))

    h = ln(x).reshape(batch * seq, width)
    q, k, v = split(h @ p["wq"]), split(h @ p["wk"]), split(h @ p["wv"])
    s = (q @ xp.transpose(k, (0, 1, 3, 2))) * (1.0 / math.sqrt(dh))
    e = xp.exp(s - stop_gradient(xp, xp.max(s, axis=-1, keepdims=True)))
    a = (e / e.sum(axis=-1, keepdims=True)) @ v
    a = xp.transpose(a, (0, 2, 1, 3)).reshape(batch * seq, width)
    x = x + (a @ p["wo"]).reshape(batch, seq, width)
    h = ln(x).reshape(batch * seq, width) @ p["w1"] + p["b1"]
    h = 0.5 * h * (1.0 + xp.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * (h * h * h))))
    return x + (h @ p["w2"] + p["b2"]).reshape(batch, seq, width)


def transformer_loss(xp: Any, p: dict[str, Any], x: Any, r: Any, heads: int) -> Any:
    return (transformer_block(xp, p, x, heads) * r).sum()


def transformer_program(batch: int, seq: int, width: int, heads: int) -> Program:
    rng = _rng(7)
    shapes = {"wq": (width, width), "wk": (width, width), "wv": (width, width), "wo": (width, width)}
    shapes |= {"w1": (width, 4 * width), "b1": (4 * width,), "w2": (4 * width, width), "b2": (width,)}
    p = {k: (rng.standard_normal(s) / np.sqrt(s[0])).astype(F32) for k, s in shapes.items()}
    x = rng.standard_normal((batch, seq, width)).astype(F32)
    r = rng.standard_normal((batch, seq, width)).astype(F32)

    def jax_fn() -> Callable[..., Any]:
        import jax
        import jax.numpy as jnp

        return jax.jit(jax.value_and_grad(lambda p, x, r: transformer_loss(jnp, p, x, r, heads)))

    def torch_fn() -> Callable[..., Any]:
        import torch

        def step(p: dict[str, Any], x: Any, r: Any) -> Any:
            tp = {k: v.detach().requires_grad_(True) for k, v in p.items()}
            loss = transformer_loss(_TorchNp(torch), tp, x, r, heads)
            loss.backward()
            return loss, {k: v.grad for k, v in tp.items()}

        return step

    return Program(
        "transformer block",
        f"pre-norm block, {heads} heads, B={batch} T={seq} D={width}, MLP 4D GELU: forward+backward "
        "w.r.t. all weights",
        (p, x, r),
        dsl.value_and_grad(lambda p, x, r: transformer_loss(dnp, p, x, r, heads)),
        lambda p, x, r: transformer_loss(np, p, x, r, heads),
        jax_fn,
        torch_fn,
        tol=2e-3,
    )


class _TorchNp:
    """The few NumPy names ``transformer_block`` uses, on torch tensors (methods are torch's own)."""

    def __init__(self, torch: Any) -> None:
        self.exp, self.sqrt, self.tanh, self.transpose = torch.exp, torch.sqrt, torch.tanh, torch.permute
        self.max = lambda v, axis, keepdims: torch.amax(v, dim=axis, keepdim=keepdims)


BUILDERS: dict[str, Callable[[], Program]] = {
    "elementwise chain": lambda: chain_program(10**7),
    "softmax + cross-entropy": lambda: xent_program(4096, 1000),
    "layer norm": lambda: layernorm_program(4096, 1024),
    "MLP training step": lambda: mlp_program(256, [784, 512, 512, 512, 512, 512, 10]),
    "second derivative": lambda: d2u_program(128, 4096),
    "transformer block": lambda: transformer_program(4, 128, 256, 4),
}
