"""Pure evidence parsing: what log lines and Flyte names say (no I/O).

`envelopes` takes runtime and shipper wrapping off a line, `logs` reads death signals,
corroboration and propeller events from it, `flyte_names` maps pod and namespace names to
executions and attempts.
"""
