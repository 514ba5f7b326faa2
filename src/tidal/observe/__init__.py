"""What a person sees of a run: the live view, the time series, the report, Prometheus metrics.

Everything here reads what the runner and the controller already record (``status()``, the
event log); nothing here makes a decision.
"""
