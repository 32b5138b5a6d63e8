import torch
import torch.nn as nn

batch_size = 16
dim = 16384


class Model(nn.Module):
    """Applies ReLU elementwise to a (batch_size, dim) float32 tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
