"""What lesson 4 (activation offloading) runs: small programs and models, and the timing settings.

solutions/04_offload.ipynb and the checks of ``course/checks/lesson04/`` run the same
programs and read the same numbers, so a notebook cell shows exactly what a check judges:

    >>> leaves, loss_fn = PROGRAMS["exp"]()       # exercise 4.1: leaves and a loss function
    >>> loss_fn().backward()
    >>> [tuple(p.grad.shape) for p in leaves]
    [(4, 3), (3,)]
    >>> model, inputs = MODELS["mlp"]()           # exercise 4.2: a model and its inputs
    >>> model(*inputs).shape
    torch.Size([16, 8])
    >>> PREDICT_NUMBERS["layers"], PAY_SETTINGS["faster link"]["bandwidth_GBs"]
    (4, 24.0)

- ``PROGRAMS`` (exercise 4.1): name -> () -> (leaves, loss function), run under a learner's
  ``SaveOnCPU``;
- ``MODELS`` (exercise 4.2): name -> () -> (model, inputs), run under a learner's threshold
  hooks;
- ``PREDICT_NUMBERS`` (exercise 4.3): four identical layers, their compute times, saved
  bytes and the link's bandwidth, in the lesson's one unit (MB = 2**20 bytes, GB/s = 1e9
  bytes per second);
- ``PAY_SETTINGS`` (exercise 4.4): those numbers with one or two things changed.

Nothing here judges an answer: which settings pay, the simulated GPU, oracles, cases and
known wrong answers live in ``course/checks/lesson04/``.
"""

from __future__ import annotations

import torch

__all__ = ["MODELS", "PAY_SETTINGS", "PREDICT_NUMBERS", "PROGRAMS"]

# --- Exercise 4.1: programs under save_on_cpu -------------------------------------------------


def _mlp_program(dtype=torch.float32):
    g = torch.Generator().manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).to(dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=dtype))
    x = torch.randn(5, 6, generator=g, dtype=dtype)
    return list(model.parameters()), lambda: model(x).pow(2).sum()


def _exp_program():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 3, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, generator=g, dtype=torch.float64, requires_grad=True)
    return [x, w], lambda: (x * w).exp().sum()  # mul saves x and w, exp saves its result


def _shared_program():
    g = torch.Generator().manual_seed(6)
    a = torch.randn(3, 4, generator=g, requires_grad=True)
    return [a], lambda: (a.sin() * a.sin().t().t()).sum()  # a view (t().t()) is saved too


#: name -> () -> (leaves, loss function); what exercise 4.1 runs under the learner's hooks.
PROGRAMS = {
    "mlp": _mlp_program,
    "exp": _exp_program,
    "mlp64": lambda: _mlp_program(torch.float64),
    "shared": _shared_program,
}

# --- Exercise 4.2: models under a size threshold ----------------------------------------------


def _mlp_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 8),
    )
    return model, [torch.randn(16, 32)]  # x: 2048 bytes; relu outputs: 4096; weights 8192+


class _Scaled(torch.nn.Module):
    """tanh((x @ w) * scale): mul saves the Parameter ``scale`` itself, not a view of it."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, 512, dtype=torch.float64).reshape(8, 64))
        self.w = torch.nn.Parameter(torch.randn(64, 64, dtype=torch.float64) / 8)

    def forward(self, x):
        return torch.tanh((x @ self.w) * self.scale)


def _scaled_model():
    torch.manual_seed(1)
    return _Scaled(), [torch.randn(8, 64, dtype=torch.float64)]  # 4096 bytes each, scale too


#: name -> () -> (model, inputs); what exercise 4.2 runs under the learner's hooks.
MODELS = {"mlp": _mlp_model, "scaled": _scaled_model}

# --- Exercises 4.3 and 4.4: the timing model's numbers ----------------------------------------

#: The numbers of exercises 4.3 and 4.4: four identical layers. One unit throughout the
#: lesson: MB = 2**20 bytes (``course.offload.model.MB``), GB/s = 1e9 bytes per second.
PREDICT_NUMBERS = {
    "layers": 4,
    "forward_ms": 3.0,  # per layer
    "backward_ms": 6.0,  # per layer (backward costs about twice forward)
    "saved_MB": 64.0,  # per layer, MB = 2**20 bytes; the last layer's stay on the device
    "bandwidth_GBs": 12.0,  # each direction, GB = 1e9 bytes
}


def _setting(copies: str = "one in flight", keep_last: bool = True, **changes) -> dict:
    return {**PREDICT_NUMBERS, **changes, "copies": copies, "keep_last": keep_last}


#: The settings of exercise 4.4: the numbers of 4.3 with one or two things changed. Each is
#: PREDICT_NUMBERS' keys, plus how copies run ("one in flight" on a side stream, or
#: "synchronous" on the compute stream) and whether the last layer stays on the device.
PAY_SETTINGS = {
    "as in 4.3": _setting(),
    "faster link": _setting(bandwidth_GBs=24.0),
    "faster link, synchronous": _setting(bandwidth_GBs=24.0, copies="synchronous"),
    "faster link, last layer too": _setting(bandwidth_GBs=24.0, keep_last=False),
    "faster link, 16 layers": _setting(bandwidth_GBs=24.0, layers=16),
    "batch x2": _setting(forward_ms=6.0, backward_ms=12.0, saved_MB=128.0),
    "16-bit activations": _setting(saved_MB=32.0),
    "slower layers": _setting(forward_ms=6.0, backward_ms=12.0),
}
