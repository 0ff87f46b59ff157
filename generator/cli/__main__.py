"""``python -m generator.cli``: the same as the ``gpumon`` console script."""

from . import main

main()
