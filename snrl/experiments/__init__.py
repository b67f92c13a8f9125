"""Multi-seed comparisons of spiking and ANN agents, training-history plots, and their stats.

```python
from snrl.experiments import CompareSpec, compare, plot_history
spec = CompareSpec(env="CartPole-v1", out="cmp", backbones=("lif", "mlp"), seeds=5,
                   steps=100_000, grid={"force_dale_law": (True, False)}, workers=2)
res = compare(spec)
plot_history("cmp/runs/lif__force_dale_law=true__seed0")
```
"""

from snrl.experiments.comparison import CompareResult, compare
from snrl.experiments.energy import count_ops, count_parameters
from snrl.experiments.execution import execute_run
from snrl.experiments.plots import plot_history
from snrl.experiments.runner import train_run
from snrl.experiments.spec import CompareSpec, RunSpec, plan_runs, spec_from_strings
from snrl.experiments.stats import bootstrap_ci, mann_whitney_u, steps_to_threshold

__all__ = [
    "CompareResult",
    "CompareSpec",
    "RunSpec",
    "bootstrap_ci",
    "compare",
    "count_ops",
    "count_parameters",
    "execute_run",
    "mann_whitney_u",
    "plan_runs",
    "plot_history",
    "spec_from_strings",
    "steps_to_threshold",
    "train_run",
]
