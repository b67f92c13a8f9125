"""Learning rules: how the gradient of a loss reaches a spiking backbone's weights.

:class:`BPTT` (the default) is autograd through every step. :class:`EProp` is e-prop
(Bellec et al. 2020): the spiking layer's input, recurrent and bias gradients come from
eligibility traces (:mod:`snrl.functional.eprop`) times the learning signal its readout
broadcasts. A rule knows layers, readouts and losses, never an algorithm; an algorithm runs
its forward inside :meth:`LearningRule.applied` and calls :meth:`LearningRule.backward`
instead of ``loss.backward()``. docs/learning_rules.md has the equations.
"""

from snrl.learning.rules import (
    BPTT,
    FEEDBACKS,
    LEARNING_RULES,
    EProp,
    LearningRule,
    OnlineEProp,
    eprop_layer_gradients,
    eprop_online_gradients,
    make_learning_rule,
)

__all__ = [
    "BPTT",
    "FEEDBACKS",
    "LEARNING_RULES",
    "EProp",
    "LearningRule",
    "OnlineEProp",
    "eprop_layer_gradients",
    "eprop_online_gradients",
    "make_learning_rule",
]
