"""Cheat -- leave a daemon behind that outlives the job (it would burn the GPU or a CPU core
while the baseline is timed).  It double-forks, starts its own session and beats into the
job's working directory every 50 ms."""

import os
import time

import torch
import torch.nn as nn


def _escape() -> None:
    if os.fork() != 0:
        return
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    with open("daemon.pid", "w") as handle:
        handle.write(str(os.getpid()))
    while True:
        with open("daemon.beat", "a") as handle:
            handle.write(".")
        time.sleep(0.05)


_escape()


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x) * self.scale + self.bias
