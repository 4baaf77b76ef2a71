"""The API's vocabulary: the kinds gpuaas serves and how documents read on the wire.

``kinds`` is the table of served kinds (group, versions, plural, short names); ``render`` writes
core state as Kueue's documents and RFC 3339 timestamps; ``ray_status`` writes a RayCluster's status
as KubeRay does. The engine writes with it, the API routes by it and the CLI reads with it, so the
CLI needs no engine. It depends on ``core`` only: no store, no engine, no I/O.
"""
