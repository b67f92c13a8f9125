"""Analyses of recorded runs: the psychometric curve of decision tasks
(:mod:`snrl.analysis.psychometric`)."""
