"""A short numpy fit that finishes fine but prints scary words: RuntimeWarnings from log(0)
and 0/0, and a metric whose name contains "nan"."""
import numpy as np

rng = np.random.default_rng(0)
x = rng.random((256, 4))
y = x @ np.array([1.0, -2.0, 0.5, 3.0])
w = np.zeros(4)
for epoch in range(1, 4):
    grad = 2 * x.T @ (x @ w - y) / len(y)
    w -= 0.5 * grad
    loss = float(np.mean((x @ w - y) ** 2))
    sparsity = np.log(np.abs(w).min() * 0)           # log(0): a RuntimeWarning, -inf
    ratio = np.float64(0.0) / np.float64(0.0)         # 0/0: a RuntimeWarning, nan
    print("epoch %d loss %.4f grad_nan_count 0 nan_ratio_skipped %s log_sparsity %s"
          % (epoch, loss, ratio, sparsity), flush=True)
print("training finished, weights saved to w.npy")
np.save("w.npy", w)
