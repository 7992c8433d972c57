"""Sets torch backend flags at import, as some public problem files do."""

import torch
import torch.nn as nn

torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = False


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x))


def get_inputs():
    return (torch.randn(4, 8),)


def get_init_inputs():
    return ()
