"""Beyond one machine: the Ray backend (`asyncbench run ... --backend ray`).

Import `asyncbench.distributed.ray_backend` only when Ray is wanted: Ray is an optional
extra (`pip install 'asyncbench[ray]'`) and everything works on one machine without it.
"""
