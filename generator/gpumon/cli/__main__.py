"""``python -m gpumon.cli``: the same as the ``gpumon`` console script."""

from . import main

main()
