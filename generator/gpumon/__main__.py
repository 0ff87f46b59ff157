"""``python -m gpumon``: the same command line as the ``gpumon`` script."""
from gpumon.cli import main

if __name__ == "__main__":
    main()
