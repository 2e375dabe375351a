"""A training loop small enough for any CPU, to try `trainrig monitor` without a GPU or PyTorch.

    trainrig monitor --job examples/llama3-8b-8xh100.yaml -- python examples/train_tiny.py
    python examples/train_tiny.py --steps 50            # on its own, with the in-process monitor

A two-layer MLP learns to predict the next token of random sequences with plain NumPy (forward,
backward and an SGD step by hand). It reports each step and the tokens it trained on through
`trainrig.monitor`, the API a real training script uses: under `trainrig monitor -- …` its steps
land in the wrapper's run; run alone, it prints the monitor's report at the end.
"""

from __future__ import annotations

import argparse

import numpy as np

import trainrig

VOCAB, HIDDEN = 256, 64


def batches(steps: int, batch: int, seq_len: int, seed: int):
    """Random token sequences, one (inputs, next tokens) pair per step."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        tokens = rng.integers(0, VOCAB, size=(batch, seq_len + 1))
        yield tokens[:, :-1], tokens[:, 1:]


def train_step(weights: dict[str, np.ndarray], inputs: np.ndarray, targets: np.ndarray, lr: float) -> float:
    """One forward, backward and SGD step of embedding → tanh MLP → logits; returns the loss."""
    embedded = weights["embed"][inputs]                      # (b, s, h)
    hidden = np.tanh(embedded @ weights["w1"])              # (b, s, h)
    logits = hidden @ weights["w2"]                          # (b, s, vocab)
    logits -= logits.max(axis=-1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=-1, keepdims=True)
    n = inputs.size
    loss = -np.log(np.take_along_axis(probs, targets[..., None], axis=-1)).sum() / n
    d_logits = probs
    np.put_along_axis(d_logits, targets[..., None], np.take_along_axis(probs, targets[..., None], -1) - 1, -1)
    d_logits /= n
    d_hidden = d_logits @ weights["w2"].T * (1 - hidden**2)
    grads = {"w2": hidden.reshape(n, -1).T @ d_logits.reshape(n, -1),
             "w1": embedded.reshape(n, -1).T @ d_hidden.reshape(n, -1)}
    d_embedded = (d_hidden @ weights["w1"].T).reshape(n, -1)
    grads["embed"] = np.zeros_like(weights["embed"])
    np.add.at(grads["embed"], inputs.reshape(-1), d_embedded)
    for name, grad in grads.items():
        weights[name] -= lr * grad
    return float(loss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    weights = {"embed": rng.normal(0, 0.1, (VOCAB, HIDDEN)), "w1": rng.normal(0, 0.1, (HIDDEN, HIDDEN)),
               "w2": rng.normal(0, 0.1, (HIDDEN, VOCAB))}
    with trainrig.monitor(name="train_tiny", seq_len=args.seq_len) as m:
        for step, (inputs, targets) in enumerate(m.data(batches(args.steps, args.batch, args.seq_len, args.seed))):
            loss = train_step(weights, inputs, targets, args.lr)
            m.step(tokens=inputs.size)
            if step % 50 == 0 or step == args.steps - 1:
                print(f"step {step:4d}  loss {loss:.3f}")


if __name__ == "__main__":
    main()
