"""`memstream bench chaos` (issue 41, docs/reliability.md): faults from a seed under a checked
load. `plan` draws the faults, `processes` and `faults` carry them out, `workload`, `junk` and
`negative` are the load, `history` logs it and checks the memory against it, `run` wires a
run on a cluster of its own and reports it."""
