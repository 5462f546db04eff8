"""A character-level language model trained on a text shipped beside it (samples/data/alice.txt, the
opening of Lewis Carroll's "Alice's Adventures in Wonderland", in the public domain): an embedding
lookup of the last ``CONTEXT`` characters, a tanh layer, and a cross-entropy with integer labels.

Run: python samples/char_model.py

The embedding is read with integer-array indexing (``emb[contexts]``: a gather) and its gradient is
a scatter-add of the rows' gradients (repeated characters accumulate); the loss picks each window's
log-probability of the next character with ``dnp.take_along_axis``. The step updates the caller's
parameters in place (``p -= lr * g``), as samples/train_mlp.py does.
"""

from __future__ import annotations

import os

import numpy as np

import dsl
import dsl.numpy as dnp

CONTEXT, EMBED, HIDDEN = 3, 12, 48
TEXT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "alice.txt")


def loss_fn(params, contexts, targets):
    """The mean cross-entropy of the next character given the ``CONTEXT`` before it."""
    emb, w1, b1, w2, b2 = params
    x = emb[contexts].reshape(contexts.shape[0], CONTEXT * EMBED)  # (windows, CONTEXT * EMBED)
    h = dnp.tanh(x @ w1 + b1)
    logits = h @ w2 + b2
    m = logits.max(axis=1, keepdims=True)
    logp = logits - m - dnp.log(dnp.sum(dnp.exp(logits - m), axis=1, keepdims=True))
    return -dnp.mean(dnp.take_along_axis(logp, targets[:, None], axis=1))


@dsl.compile
def step(params, contexts, targets, lr):
    loss, grads = dsl.value_and_grad(loss_fn)(params, contexts, targets)
    for p, g in zip(params, grads):
        p -= lr * g  # params are not differentiated here: the caller's arrays are updated in place
    return loss


def windows(text: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The alphabet, every window of ``CONTEXT`` character ids and the id that follows each."""
    chars = sorted(set(text))
    ids = np.array([chars.index(c) for c in text], np.int64)
    contexts = np.stack([ids[k : len(ids) - CONTEXT + k] for k in range(CONTEXT)], axis=1)
    return chars, contexts, ids[CONTEXT:]


def init_params(rng: np.random.Generator, vocab: int) -> list[np.ndarray]:
    def layer(m: int, n: int) -> np.ndarray:
        return (rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32)

    emb = rng.standard_normal((vocab, EMBED)).astype(np.float32)
    return [emb, layer(CONTEXT * EMBED, HIDDEN), np.zeros(HIDDEN, np.float32), layer(HIDDEN, vocab) * 0.1,
            np.zeros(vocab, np.float32)]  # fmt: skip


def loss_numpy(params, contexts, targets) -> float:
    emb, w1, b1, w2, b2 = (p.astype(np.float64) for p in params)
    h = np.tanh(emb[contexts].reshape(len(contexts), -1) @ w1 + b1)
    logits = h @ w2 + b2
    logits -= logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(targets)), targets].mean())


def main() -> None:
    with open(TEXT, encoding="utf-8") as f:
        chars, contexts, targets = windows(f.read())
    rng = np.random.default_rng(0)
    params = init_params(rng, len(chars))
    first = loss_numpy(params, contexts, targets)
    losses = [float(step(params, contexts, targets, 1.0)) for _ in range(60)]
    assert abs(losses[0] - first) <= 1e-4 * first, (losses[0], first)
    last = loss_numpy(params, contexts, targets)
    np.testing.assert_allclose(float(step(params, contexts, targets, 0.0)), last, rtol=1e-4)
    assert last < 0.75 * first, f"loss did not go down enough: {first:.3f} -> {last:.3f}"
    print(f"{len(targets)} windows of {CONTEXT} characters over an alphabet of {len(chars)}")
    for i in (0, 20, 40, 59):
        print(f"step {i:2d}: loss {losses[i]:.4f}")
    print(f"cross-entropy {first:.3f} -> {last:.3f} nats per character (uniform: {np.log(len(chars)):.3f})")


if __name__ == "__main__":
    main()
