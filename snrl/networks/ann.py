"""ANN backbones behind the same recurrent protocol as the spiking ones.

An :class:`MLP` is a recurrent module with an empty state ``()``, so spiking and ANN agents run
through the same code path. :class:`GRU` and :class:`LSTM` carry their hidden state across env
steps exactly like a spiking backbone carries its membranes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from snrl.errors import UserError
from snrl.functional.grad import lazy_no_grad
from snrl.functional.state import mask_state
from snrl.networks._args import layer_widths
from snrl.networks.activity import Activity, LayerActivity
from snrl.networks.protocol import BackboneOutput, LayerInfo


def _check_input(x: Tensor, input_size: int) -> None:
    if x.dim() not in (2, 3) or x.shape[-1] != input_size:
        raise ValueError(
            f"input of shape {tuple(x.shape)} does not match input_size={input_size} "
            "(expected (B, F) or (T, B, F))"
        )


def _check_batch(x: Tensor, h: Tensor) -> None:
    if x.shape[-2] != h.shape[0]:
        raise ValueError(
            f"batch size of input {tuple(x.shape)} does not match the state {tuple(h.shape)} "
            "(build the state with initial_state(batch_size) for this batch)"
        )


def _grad(p: Tensor) -> Tensor:
    """``p.grad``, created as zeros where there is none."""
    if p.grad is None:
        p.grad = torch.zeros_like(p)
    return p.grad


def _plain(layer: nn.Module) -> bool:
    """A bare ``nn.Linear``: no forward hooks (pruning adds one) and not a parametrized
    subclass, so ``F.linear`` with its ``weight`` and ``bias`` is its whole forward."""
    return type(layer) is nn.Linear and not (layer._forward_hooks or layer._forward_pre_hooks)


#: hidden-layer nonlinearities of :class:`MLP`
ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu}


class MLP(nn.Module):
    """Feed-forward network (tanh or ReLU hidden layers); its recurrent state is ``()``.

    Args:
        input_size: observation features F.
        hidden_size: width of the hidden layers: an int (every layer; ``n_layers`` of them)
            or a sequence of ints (one per layer).
        output_size: width of the final linear layer, or None to output the last hidden layer.
        n_layers: hidden layers (default: 1 for an int ``hidden_size``, else its length).
        activation: ``"tanh"`` (SB3's PPO default) or ``"relu"`` (SB3's DQN default) after
            each hidden layer.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int | Sequence[int] | None = None,
        output_size: int | None = None,
        *,
        n_layers: int | None = None,
        activation: str = "tanh",
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise UserError(
                f"unknown activation {activation!r} (choose one of {', '.join(ACTIVATIONS)})"
            )
        self.activation = activation
        self._act = ACTIVATIONS[activation]
        widths = layer_widths(hidden_size, n_layers, "MLP")
        self.input_size = input_size
        self.hidden_size = widths
        self.n_layers = len(widths)
        sizes = [input_size, *widths]
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.head = nn.Linear(sizes[-1], output_size) if output_size is not None else None
        self.output_size = output_size if output_size is not None else sizes[-1]

    def initial_state(self, batch_size: int, **_: object) -> tuple:
        return ()

    def reset_state(self, state: tuple, done: Tensor, **_: object) -> tuple:
        return state

    def _linears(self) -> list[nn.Linear]:
        """The hidden layers, then the head if there is one."""
        layers = list(self.hidden._modules.values())
        head = self._modules.get("head")  # None: stored as a plain attribute
        return layers if head is None else [*layers, head]

    def _outputs(self, x: Tensor) -> list[Tensor]:
        """Every layer's output for ``x``: the hidden layers' (after the nonlinearity), then
        the head's. The one forward of the MLP, with or without a graph."""
        _check_input(x, self.input_size)
        layers = self._linears()
        n_hidden = len(self.hidden._modules)
        act, outs, h = self._act, [], x
        for k, layer in enumerate(layers):
            if _plain(layer):
                # the parameters read from the layer's dict: nn.Module.__getattr__ and the
                # module call cost ~20 us of a 45 us one-row forward of a 2x256 network
                p = layer._parameters
                h = F.linear(h, p["weight"], p["bias"])
            else:  # hooks (pruning), a parametrization, another module: its own call
                h = layer(h)
            if k < n_hidden:
                h = act(h)
            outs.append(h)
        return outs

    def run(self, x: Tensor, state: tuple = ()) -> BackboneOutput:
        outs = self._outputs(x)
        layers = [
            LayerActivity(f"mlp{i}", "ann", layer.out_features, extra={"h": h})
            for i, (layer, h) in enumerate(zip(self.hidden, outs))
        ]
        return BackboneOutput(outs[-1], (), Activity(layers))

    def forward(self, x: Tensor, state: tuple = ()) -> tuple[Tensor, tuple]:
        """``(out, state)``: :meth:`run` without building the activity record."""
        return self._outputs(x)[-1], state

    # ---- the gradient by hand (DQN's transition step) ------------------------------------
    def plain(self) -> bool:
        """Whether every layer is a bare ``nn.Linear`` (no hooks, e.g. from pruning, and no
        parametrization): what :meth:`backward_into` can differentiate by hand."""
        return all(_plain(layer) for layer in self._linears())

    @lazy_no_grad
    def forward_saved(self, x: Tensor) -> list[Tensor]:
        """The output of :meth:`run` for a batch ``x`` (B, F), computed without an autograd
        graph: ``[x, h_1, ..., h_L, out]`` (``out`` is ``h_L`` without a head), what
        :meth:`backward_into` needs.

        A small network's autograd graph costs as much bookkeeping as arithmetic; this pair
        runs the same products without it (tested against autograd in float64)."""
        if x.dim() != 2:
            raise ValueError(f"forward_saved takes a batch (B, F), got {tuple(x.shape)}")
        outs = self._outputs(x)
        return [x, *outs, outs[-1]] if self.head is None else [x, *outs]

    @lazy_no_grad
    def backward_into(
        self, saved: list[Tensor], grad_out: Tensor, *, accumulate: bool = True
    ) -> None:
        """Add the gradient of ``sum(grad_out * out)`` with respect to every trainable
        parameter into its ``.grad``, as ``out.backward(grad_out)`` would after :meth:`run`;
        ``saved`` is what :meth:`forward_saved` returned for the same parameters.

        ``accumulate=False`` writes the gradients over what ``.grad`` held instead (no
        zeroing needed before; a parameter without ``requires_grad`` is left as it is)."""
        if not self.plain():
            raise ValueError(
                "backward_into needs bare nn.Linear layers (a layer has hooks or a "
                "parametrization): use autograd"
            )
        layers = self._linears()
        n_hidden = len(self.hidden._modules)
        g = grad_out
        for k in range(len(layers) - 1, -1, -1):
            inp = saved[k]
            if k < n_hidden:  # through the nonlinearity that made saved[k + 1]
                h = saved[k + 1]
                # ReLU: h >= 0, so sign(h) is its derivative (0 or 1; a product with a
                # boolean mask costs four times as much); tanh: 1 - h^2
                g = g * h.sign() if self.activation == "relu" else g * (1 - h * h)
            w, b = layers[k]._parameters["weight"], layers[k]._parameters["bias"]
            if w.requires_grad:  # beta 0: the old .grad is ignored (NaN included)
                _grad(w).addmm_(g.t(), inp, beta=1 if accumulate else 0)
            if b is not None and b.requires_grad:
                if accumulate:
                    _grad(b).add_(g.sum(0))
                else:
                    torch.sum(g, 0, out=_grad(b))
            if k > 0:
                g = g @ w

    def layer_info(self) -> list[LayerInfo]:
        infos = []
        n_out = [layer.out_features for layer in self.hidden[1:]]
        n_out.append(self.head.out_features if self.head is not None else 0)
        for i, layer in enumerate(self.hidden):
            infos.append(
                LayerInfo(
                    f"mlp{i}", "ann", layer.out_features, layer.in_features, n_out[i], None, None
                )
            )
        return infos


class GRUState(NamedTuple):
    h: Tensor  # (B, H)


class LSTMState(NamedTuple):
    h: Tensor  # (B, H)
    c: Tensor  # (B, H)


class _RecurrentANN(nn.Module):
    """One recurrent cell layer + linear head; state rows reset to zeros."""

    kind = ""

    def __init__(self, input_size: int, hidden_size: int, output_size: int | None = None):
        super().__init__()
        if isinstance(hidden_size, bool) or not isinstance(hidden_size, int) or hidden_size < 1:
            raise UserError(
                f"{self.kind.upper()} hidden_size={hidden_size!r} (give one int width >= 1; "
                "a GRU/LSTM backbone has one recurrent layer)"
            )
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.n_layers = 1
        cls = nn.GRU if self.kind == "gru" else nn.LSTM
        self.rnn = cls(input_size, hidden_size)
        self.head = nn.Linear(hidden_size, output_size) if output_size is not None else None
        self.output_size = output_size if output_size is not None else hidden_size

    def _zeros(self, batch_size: int, device: torch.device | None) -> Tensor:
        """Zeros (B, hidden) on ``device``, by default the weights' (as the spiking layers)."""
        dev = self.rnn.weight_hh_l0.device if device is None else device
        return torch.zeros(batch_size, self.hidden_size, device=dev)

    def initial_state(self, batch_size: int, *, device: torch.device | None = None, **_: object):
        z = self._zeros(batch_size, device)
        return GRUState(z) if self.kind == "gru" else LSTMState(z, z.clone())

    def reset_state(self, state, done: Tensor, **_: object):
        return mask_state(done, self.initial_state(done.shape[0], device=state[0].device), state)

    def run(self, x: Tensor, state) -> BackboneOutput:
        _check_input(x, self.input_size)
        _check_batch(x, state[0])
        seq = x if x.dim() == 3 else x.unsqueeze(0)
        if self.kind == "gru":
            hs, h = self.rnn(seq, state.h.unsqueeze(0))
            new_state = GRUState(h[0])
        else:
            hs, (h, c) = self.rnn(seq, (state.h.unsqueeze(0), state.c.unsqueeze(0)))
            new_state = LSTMState(h[0], c[0])
        if x.dim() == 2:
            hs = hs[0]
        out = self.head(hs) if self.head is not None else hs
        act = LayerActivity(f"{self.kind}0", "ann", self.hidden_size, extra={"h": hs})
        return BackboneOutput(out, new_state, Activity([act]))

    def forward(self, x: Tensor, state):
        out, state, _ = self.run(x, state)
        return out, state

    def layer_info(self) -> list[LayerInfo]:
        n_next = self.head.out_features if self.head is not None else 0
        return [
            LayerInfo(
                f"{self.kind}0",
                "ann",
                self.hidden_size,
                self.input_size,
                self.hidden_size + n_next,
                None,
                None,
            )
        ]


class GRU(_RecurrentANN):
    """Single-layer GRU backbone with a linear head; state :class:`GRUState`."""

    kind = "gru"


class LSTM(_RecurrentANN):
    """Single-layer LSTM backbone with a linear head; state :class:`LSTMState`."""

    kind = "lstm"
