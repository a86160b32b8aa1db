"""The global state a recomputation must see as the forward saw it: RNG and autocast.

A checkpointed function runs twice, the second time in backward, long after the forward.
Whatever it reads from global state must be the same both times, or the recomputation
computes something else. Two pieces matter:

- the random number generators: dropout draws a mask; the recomputation must draw the
  same one. We stash the CPU generator's state (and, for accelerator tensors among the
  inputs, each of their devices' states) before the forward, and in the recomputation set
  them back inside ``torch.random.fork_rng``, so the caller's generators move on as if the
  recomputation had never drawn;
- autocast: a forward under ``torch.autocast`` saved half-precision tensors; the
  recomputation (in backward, outside the ``with``) re-enters the same autocast settings.

What the learner should remember::

    state = ForwardState.capture(args, preserve_rng_state=True)   # before the forward
    with state.restored():                                        # in backward
        fn(*args)                                                 # OK: same dropout mask

    ForwardState.capture(args, preserve_rng_state=False)
                                       # BAD with dropout: the recomputed mask differs, so
                                       #     the gradients belong to another forward

Example:
    >>> import torch
    >>> state = ForwardState.capture((torch.ones(2),), preserve_rng_state=True)
    >>> first = torch.rand(3)
    >>> with state.restored():
    ...     again = torch.rand(3)
    >>> torch.equal(first, again)
    True
    >>> torch.equal(torch.rand(3), again)       # outside, the generator had moved on
    False

Differences from torch: torch's ``_checkpoint_without_reentrant_generator`` does this inline
with ``get_device_states`` / ``set_device_states`` (which we call: they are torch's public
helpers) and also restores a ``DeviceContext`` mode and a dynamo tracing flag, which the
course leaves out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_leaves
from torch.utils.checkpoint import DefaultDeviceType, get_device_states, set_device_states

__all__ = ["ForwardState", "infer_device_type"]


def infer_device_type(args: tuple) -> str:
    """The accelerator type whose RNG to stash: the inputs' (CUDA first), else the default.

    Example:
        >>> import torch
        >>> infer_device_type((torch.ones(1), 3)) == DefaultDeviceType.get_device_type()
        True
    """
    types = [
        x.device.type for x in tree_leaves(args) if isinstance(x, torch.Tensor) and x.device.type != "cpu"
    ]
    if not types:
        return DefaultDeviceType.get_device_type()
    return "cuda" if "cuda" in types else types[0]


def _autocast_kwargs(device_type: str) -> dict[str, Any] | None:
    if not torch.amp.is_autocast_available(device_type):
        return None
    return {
        "enabled": torch.is_autocast_enabled(device_type),
        "dtype": torch.get_autocast_dtype(device_type),
        "cache_enabled": torch.is_autocast_cache_enabled(),
    }


@dataclass
class ForwardState:
    """What :meth:`capture` read before the forward, for :meth:`restored` to set back."""

    device_type: str
    preserve_rng_state: bool
    cpu_rng_state: torch.Tensor | None = None
    had_device_in_fwd: bool = False
    fwd_devices: list[int] = field(default_factory=list)
    fwd_device_states: list[torch.Tensor] = field(default_factory=list)
    device_autocast: dict[str, Any] | None = None
    cpu_autocast: dict[str, Any] | None = None

    @classmethod
    def capture(cls, args: tuple, preserve_rng_state: bool) -> ForwardState:
        device_type = infer_device_type(args)
        state = cls(device_type, preserve_rng_state)
        state.device_autocast, state.cpu_autocast = _autocast_kwargs(device_type), _autocast_kwargs("cpu")
        if preserve_rng_state:
            state.cpu_rng_state = torch.get_rng_state()
            # Never initialise CUDA ourselves: only stash its state if it is already up.
            if getattr(state._device_module(), "_initialized", False):
                state.had_device_in_fwd = True
                state.fwd_devices, state.fwd_device_states = get_device_states(*args)
        return state

    def _device_module(self) -> Any:
        return torch.device("meta") if self.device_type == "meta" else getattr(torch, self.device_type)

    @contextlib.contextmanager
    def restored(self) -> Iterator[None]:
        """Inside: the forward's RNG states and autocast settings; after: the caller's RNG back."""
        devices = self.fwd_devices if self.preserve_rng_state and self.had_device_in_fwd else []
        with torch.random.fork_rng(
            devices=devices, enabled=self.preserve_rng_state, device_type=self.device_type
        ):
            if self.preserve_rng_state:
                torch.set_rng_state(self.cpu_rng_state)
                if self.had_device_in_fwd:
                    set_device_states(self.fwd_devices, self.fwd_device_states, device_type=self.device_type)
            device_autocast = (
                torch.amp.autocast(device_type=self.device_type, **self.device_autocast)
                if self.device_autocast is not None
                else contextlib.nullcontext()
            )
            with device_autocast, torch.amp.autocast("cpu", **self.cpu_autocast):
                yield

    def check_device_not_initialized_in_forward(self) -> None:
        """Raise when the forward itself started the accelerator: its RNG state was not stashed."""
        if self.preserve_rng_state and not self.had_device_in_fwd:
            if getattr(self._device_module(), "_initialized", False):
                raise RuntimeError(
                    f"course.checkpoint: the {self.device_type} device was first initialised inside the "
                    "checkpointed forward, so its RNG state could not be stashed for the recomputation."
                )
