"""``python -m gpuaas``: the same entry point as the ``gpuaas`` command."""

from gpuaas.cli.main import main

main()
