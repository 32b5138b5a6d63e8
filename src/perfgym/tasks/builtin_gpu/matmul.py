import torch
import torch.nn as nn

M = 256
K = 192
N = 320


class Model(nn.Module):
    """Matrix product C = A @ B of float32 matrices A (M x K) and B (K x N)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return A @ B


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
