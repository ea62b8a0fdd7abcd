"""The scan: a window of Loki death signals joined to Flyte Admin's attempts and S3's outputs.

`run.ScanRun` is one scan (window, scope, lanes, candidates, findings, gaps); `sweep` lists the
executions whose attempts may have ended in the window; `resolve` maps a signalled pod to its
attempt and a namespace to its project and domain; `signals` is the one Loki death-signal
reader; `lookups` holds the cached Admin and S3 reads a run (or one examination) makes;
`examine` judges a single execution by the same rules (show, relaunch). What each verdict means:
docs/verdicts.md; the report: docs/report.md.
"""
