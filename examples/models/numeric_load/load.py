"""A 200x200 matrix product, a 20x20 inverse and a 35x35 pseudo-inverse every tick (the
numerical load LiCoRICE runs inside one 1 ms tick). BLAS runs single-threaded: rtloop
starts Python modules with OPENBLAS_NUM_THREADS=1 (one core per process)."""

import numpy as np

rng = np.random.default_rng(0)
A = rng.standard_normal((200, 200))
B = rng.standard_normal((200, 200))
C = rng.standard_normal((20, 20)) + 20.0 * np.eye(20)
D = rng.standard_normal((35, 35))
P = np.empty((200, 200))


def step(result):
    np.matmul(A, B, out=P)
    Ci = np.linalg.inv(C)
    Dp = np.linalg.pinv(D)
    result[0] = P[0, 0]
    result[1] = Ci[0, 0]
    result[2] = Dp[0, 0]
