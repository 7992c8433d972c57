"""An LSTM whose initial states are plain tensor attributes, moved in forward."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int, hidden: int, layers: int, batch: int) -> None:
        super().__init__()
        self.h0 = torch.randn(layers, batch, hidden)
        self.c0 = torch.randn(layers, batch, hidden)
        self.lstm = nn.LSTM(features, hidden, layers, batch_first=True, dropout=0.0)
        self.fc = nn.Linear(hidden, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.h0 = self.h0.to(x.device)
        self.c0 = self.c0.to(x.device)
        out, _ = self.lstm(x, (self.h0, self.c0))
        return self.fc(out[:, -1, :])


def get_inputs():
    return [torch.randn(3, 7, 5)]


def get_init_inputs():
    return [5, 6, 2, 3]
