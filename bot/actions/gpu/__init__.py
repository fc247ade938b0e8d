"""GPU actions: what an XID means, and what `nvidia-smi` says about each GPU on a node.

`xid` classifies XID codes against the catalog in `xid.yaml` (data, not code) and registers
the read-only action `gpu.classify_xid`. `nvidia_smi` holds pure parsers for the output of
`nvidia-smi --query-gpu` and `nvidia-smi -q`, which node Jobs capture on the GPU node and
hand back as text; they do no I/O themselves.
"""

__all__: list[str] = []
