"""Look inside a trained spiking network: spike-train statistics, E/I input currents,
trial-aligned analyses, tuning curves, figures and exports (NWB, Neo).

Pure functions (:mod:`snrl.analysis.stats`, :mod:`snrl.analysis.trials`,
:mod:`snrl.analysis.currents`) compute one number from arrays; :class:`SpikeStats` and
:class:`NetworkAnalysis` accumulate them episode by episode (constant memory);
:func:`analyze` rolls out an algorithm and is what ``snrl analyze`` runs. Every reported
number is defined in :data:`METRICS` (docs/analysis.md is generated from it). The
psychometric curve of decision tasks lives in :mod:`snrl.analysis.psychometric` (with binomial
intervals and lapse rates), the behaviour readouts of other task families (context and
congruency, the f1 x f2 matrix and Weber curve, produced against sample interval, accuracy
against delay, reaction time against coherence, error counts) in
:mod:`snrl.analysis.behaviour`; perturbations during
evaluation (silencing or stimulating E or I neurons, current noise, lesions of task-variance
clusters; ``snrl perturb``) in :mod:`snrl.analysis.perturb`; the task variance of each
neuron of a multitask run and its clusters in :mod:`snrl.analysis.taskvar`. Decoding and
dimensionality of trial activity in :mod:`snrl.analysis.dynamics`; targeted dimensionality
reduction and the demixed variance of trial activity in :mod:`snrl.analysis.tdr`;
connectivity by E/I block in :mod:`snrl.analysis.connectivity`; fixed and slow points in
:mod:`snrl.analysis.fixed_points`. Figures for a paper or a talk: :mod:`snrl.analysis.style`
(``result.write(out, style="paper")``, :func:`write_figure`).
"""

from snrl.analysis.behaviour import (
    accuracy_by_delay,
    behaviour_readouts,
    chronometric_curve,
    comparison_accuracy,
    context_accuracy,
    error_counts,
    interval_production,
)
from snrl.analysis.currents import layer_weights, synaptic_currents
from snrl.analysis.export import SpikeExport
from snrl.analysis.psychometric import (
    binomial_ci,
    fit_logistic_lapse,
    psychometric_curve,
)
from snrl.analysis.run import ANALYSIS_FILES, NetworkAnalysis, analyze, read_summary
from snrl.analysis.stats import (
    METRICS,
    SpikeStats,
    fano_factor,
    firing_rate,
    isi_cv,
    metrics_table,
    population_sparseness,
    spike_count_correlation,
    window_counts,
)
from snrl.analysis.style import FIGURE_STYLES, apply_style, write_figure
from snrl.analysis.trials import PSTHAccumulator, TuningAccumulator, pca, selectivity

__all__ = [
    "ANALYSIS_FILES",
    "FIGURE_STYLES",
    "METRICS",
    "NetworkAnalysis",
    "PSTHAccumulator",
    "SpikeExport",
    "SpikeStats",
    "TuningAccumulator",
    "accuracy_by_delay",
    "analyze",
    "apply_style",
    "behaviour_readouts",
    "binomial_ci",
    "chronometric_curve",
    "comparison_accuracy",
    "context_accuracy",
    "error_counts",
    "fano_factor",
    "firing_rate",
    "fit_logistic_lapse",
    "interval_production",
    "isi_cv",
    "layer_weights",
    "metrics_table",
    "pca",
    "population_sparseness",
    "psychometric_curve",
    "read_summary",
    "selectivity",
    "spike_count_correlation",
    "synaptic_currents",
    "window_counts",
    "write_figure",
]
