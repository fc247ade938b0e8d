"""GPU actions: what an XID means, what the tools on a node say about its GPUs, and the
few things the bot may do to a GPU.

Parsers, no I/O: `xid` classifies XID codes against the catalog in `xid.yaml` (data, not
code); `nvidia_smi` reads `nvidia-smi --query-gpu` and `nvidia-smi -q` output; `dcgmi`
reads the JSON report of `dcgmi diag -r N -j`.

Actions, each running its command on the node as a `k8s.node_job` Job
(`node_job.run_checked`) and handing the captured text to a parser: `health`
registers `gpu.health_snapshot` (read: every GPU as nvidia-smi sees it, judged against
the node's GPU capacity), `reset` registers `gpu.reset` (disruptive: `nvidia-smi
--gpu-reset` only for a GPU no process holds) and `diag` registers `gpu.diag` (change:
DCGM diagnostics, level 2 the gate before uncordon). `xid` also registers the read-only
`gpu.classify_xid`, and `history` registers `gpu.fault_history` (read: the XID faults a
node and a card had before, from the alert history, judged by the repeat rules).
"""

__all__: list[str] = []
